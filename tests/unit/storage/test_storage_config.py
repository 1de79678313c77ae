"""connector.storage: locations resolved and mapped between s3:// and s3a://, and one StorageConfig turned into what
delta-rs, pyarrow and Spark's S3A take, secrets never printed (docs/object_storage.md)."""

from __future__ import annotations

import pickle

import pytest

from connector.errors import StorageConfigError
from connector.storage import locations
from connector.storage.config import StorageConfig, parse_storage_options

SECRET = "wJalrXUtnFEMI-secret-value"
ENV = {"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "eu-west-1",
       "AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}


def test_locations_resolve_s3a_as_s3_and_map_back_for_spark(tmp_path):
    assert locations.resolve("s3a://bucket/a/b/") == "s3://bucket/a/b"
    assert locations.resolve("S3://bucket") == "s3://bucket"
    assert locations.for_spark("s3://bucket/t") == "s3a://bucket/t"
    assert locations.for_spark(str(tmp_path)) == str(tmp_path)
    assert locations.resolve(f"file://{tmp_path}") == str(tmp_path)
    assert locations.join("s3://bucket/root", "tables", "bronze") == "s3://bucket/root/tables/bronze"
    assert not locations.is_uri(f"file://{tmp_path}") and locations.is_uri("s3://b/k")


@pytest.mark.parametrize(("location", "message"), [
    ("gs://bucket/t", "URI scheme gs:// is not supported"),
    ("hdfs://nn/t", "URI scheme hdfs:// is not supported"),
    ("s3:///t", "no bucket"),
])
def test_unsupported_locations_are_one_line_naming_the_flag(location, message):
    with pytest.raises(StorageConfigError, match=message) as info:
        locations.resolve(location, "--workdir")
    assert str(info.value).startswith(f"--workdir {location}") and "\n" not in str(info.value)


def test_options_win_over_the_environment_and_each_client_gets_its_form():
    config = StorageConfig.from_options({"aws-region": "us-west-2", "AWS_ENDPOINT_URL": "http://10.0.0.9:9000/"},
                                        environ=ENV)
    delta = config.delta_storage_options()
    assert delta["AWS_REGION"] == "us-west-2" and delta["AWS_ENDPOINT_URL"] == "http://10.0.0.9:9000"
    assert delta["AWS_ALLOW_HTTP"] == "true" and delta["AWS_ACCESS_KEY_ID"] == "AKIDENV"
    hadoop = config.hadoop_conf()
    assert hadoop["spark.hadoop.fs.s3a.endpoint"] == "http://10.0.0.9:9000"
    assert hadoop["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert hadoop["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert hadoop["spark.hadoop.fs.s3a.secret.key"] == SECRET
    assert hadoop["spark.hadoop.fs.s3a.endpoint.region"] == "us-west-2"
    fs = config.arrow_filesystem()
    assert fs.region == "us-west-2"


def test_the_region_alias_and_defaults_without_an_endpoint():
    assert StorageConfig.from_options({}, environ={"AWS_DEFAULT_REGION": "ap-south-1"}).region == "ap-south-1"
    config = StorageConfig.from_options({}, environ={})
    assert config.region == "us-east-1" and config.endpoint is None
    assert "AWS_ALLOW_HTTP" not in config.delta_storage_options()
    assert "spark.hadoop.fs.s3a.access.key" not in config.hadoop_conf()  # the SDK's default chain


def test_a_session_token_selects_the_temporary_credentials_provider():
    config = StorageConfig.from_options({"AWS_SESSION_TOKEN": "tok"}, environ=ENV)
    assert config.hadoop_conf()["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith(
        "TemporaryAWSCredentialsProvider")


def test_secrets_never_show_in_repr_or_errors():
    config = StorageConfig.from_options({"AWS_SESSION_TOKEN": "tok-secret"}, environ=ENV)
    text = repr(config) + str(config.redacted())
    assert SECRET not in text and "tok-secret" not in text and "AKIDENV" in text
    with pytest.raises(StorageConfigError) as info:
        config.merged({"AWS_SECRET_ACCES_KEY": SECRET})  # a typo
    assert SECRET not in str(info.value) and "AWS_SECRET_ACCES_KEY: unknown key" in str(info.value)


@pytest.mark.parametrize(("options", "message"), [
    ({"AWS_ALLOW_HTTP": "maybe"}, "AWS_ALLOW_HTTP='maybe': must be true or false"),
    ({"AWS_ENDPOINT_URL": "127.0.0.1:9000"}, "must be http"),
    ({"AWS_REGION": " "}, "empty value"),
    ({"fs.s3a.endpoint": "x"}, "unknown key"),
])
def test_bad_options_are_refused_naming_the_key(options, message):
    with pytest.raises(StorageConfigError, match=message):
        StorageConfig.from_options(options, environ={}, source="--storage-option")


def test_cli_pairs_and_pickling():
    assert parse_storage_options(["AWS_REGION=eu-central-1", "AWS_ENDPOINT_URL=http://h:1/x=y"]) == {
        "AWS_REGION": "eu-central-1", "AWS_ENDPOINT_URL": "http://h:1/x=y"}
    with pytest.raises(StorageConfigError, match="write KEY=VALUE"):
        parse_storage_options(["AWS_REGION"])
    config = StorageConfig.from_options({}, environ=ENV)
    copy = pickle.loads(pickle.dumps(config))  # the writers carry it to the executors
    assert copy == config and hash(copy) == hash(config)
