"""Issue 51: bad object-store input is refused before Spark starts, in one line and exit code 2, never showing the
secret: wrong credentials (the key id named), a bucket that does not exist, an endpoint where nothing listens, a
URI scheme nothing supports, an unknown storage option (docs/object_storage.md "When it does not work")."""

from __future__ import annotations

import time

import pytest

from broker_stub.launcher import free_port
from streaming_apps.cli import main
from tests.support.s3_server import TEST_BUCKET

SECRET = "not-the-secret-0123456789"


def _run_bronze(workdir: str, options: dict[str, str], extra: tuple[str, ...] = ()) -> list[str]:
    args = ["run", "bronze", "--brokers", "broker-a=127.0.0.1:10912", "--workdir", workdir, *extra]
    for key, value in options.items():
        args += ["--storage-option", f"{key}={value}"]
    return args


def _refused(capsys, args: list[str]) -> str:
    started = time.monotonic()
    assert main(args) == 2
    assert time.monotonic() - started < 20, "refused before Spark starts"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    assert SECRET not in err[0]
    return err[0]


def test_wrong_credentials_name_the_key_id_never_the_secret(s3_server, capsys):
    options = {**s3_server.storage_options(), "AWS_SECRET_ACCESS_KEY": SECRET}
    line = _refused(capsys, _run_bronze(f"s3://{TEST_BUCKET}/refusals", options))
    assert "refused the credentials" in line and f"access key id {s3_server.access_key}" in line
    assert "--workdir" in line


def test_a_missing_bucket_is_named(s3_server, capsys):
    line = _refused(capsys, _run_bronze("s3://no-such-bucket-here/x", s3_server.storage_options()))
    assert "bucket no-such-bucket-here does not exist" in line


def test_an_endpoint_where_nothing_listens(s3_server, capsys):
    endpoint = f"http://127.0.0.1:{free_port('127.0.0.1')}"
    options = {**s3_server.storage_options(), "AWS_ENDPOINT_URL": endpoint}
    line = _refused(capsys, _run_bronze(f"s3://{TEST_BUCKET}/x", options))
    assert f"nothing answers at {endpoint}" in line


@pytest.mark.parametrize(("workdir", "options", "expected"), [
    ("gs://bucket/lake", {}, "URI scheme gs:// is not supported"),
    ("s3://bucket/lake", {"AWS_SECRET_ACCES_KEY": SECRET}, "AWS_SECRET_ACCES_KEY: unknown key"),
    ("s3://bucket/lake", {"AWS_ENDPOINT_URL": "minio:9000"}, "must be http(s)://host[:port]"),
])
def test_unsupported_schemes_and_bad_options(capsys, workdir, options, expected):
    assert expected in _refused(capsys, _run_bronze(workdir, options))


@pytest.mark.parametrize("command", [
    ["query", "SELECT 1 FROM bronze", "--workdir", "s3://no-such-bucket-here/x"],
    ["status", "--workdir", "s3://no-such-bucket-here/x"],
    ["restore", "s3://no-such-bucket-here/x/tables/bronze", "--broker-name", "broker-a", "--store-dir", "STORE"],
])
def test_the_other_commands_refuse_a_missing_bucket_the_same_way(s3_server, capsys, tmp_path, command):
    command = [str(tmp_path / "store") if a == "STORE" else a for a in command]
    options = [a for k, v in s3_server.storage_options().items() for a in ("--storage-option", f"{k}={v}")]
    assert "bucket no-such-bucket-here does not exist" in _refused(capsys, [*command, *options])
