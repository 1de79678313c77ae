"""connector.options: every option, its default, and the error text for bad values."""

from __future__ import annotations

import pytest

from connector.decode.topic_filter import TopicFilter
from connector.errors import HAReplicaError, HAReplicaOptionError
from connector.options.parse import BrokerEndpoint, SourceOptions, parse_brokers

BROKERS = "broker-a=127.0.0.1:10912"


def parse(**opts) -> SourceOptions:
    return SourceOptions.from_options({"brokers": BROKERS, **opts})


def test_defaults_follow_upstream():
    o = SourceOptions.from_options({"brokers": BROKERS})
    assert o.brokers == (BrokerEndpoint("broker-a", "127.0.0.1", 10912, "127.0.0.1", 10911),)
    assert o.starting_offsets == "earliest"
    assert o.max_bytes_per_trigger is None
    f, d = o.fetch, o.decode
    assert (f.fail_on_data_loss, d.decompress_body) == (True, True)
    assert (f.connect_timeout_ms, f.read_timeout_ms, f.fetch_retries, f.heartbeat_interval_ms) == (5000, 20000, 3, 5000)
    assert (d.max_records_per_batch, d.max_bytes_per_batch) == (10000, 8 * 1024 * 1024)


def test_option_names_are_case_insensitive_as_spark_passes_them():
    o = SourceOptions.from_options({"BROKERS": BROKERS, "maxbytespertrigger": "100", "FailOnDataLoss": "FALSE",
                                    "decompressbody": "false", "connecttimeoutms": "7", "READTIMEOUTMS": "8",
                                    "fetchretries": "0", "hasendheartbeatinterval": "1000",
                                    "arrowmaxrecordsperbatch": "5", "arrowmaxbytesperbatch": "6"})
    assert o.max_bytes_per_trigger == 100
    f, d = o.fetch, o.decode
    assert (f.fail_on_data_loss, d.decompress_body, f.connect_timeout_ms, f.read_timeout_ms) == (False, False, 7, 8)
    assert (f.fetch_retries, f.heartbeat_interval_ms, d.max_records_per_batch, d.max_bytes_per_batch) == (0, 1000, 5, 6)


def test_several_brokers_ipv6_and_explicit_remoting_address():
    o = parse_brokers(" broker-a=10.0.0.1:10912 , broker-b=[::1]:20912/[::2]:30911,b_c.1=h.example:3 ")
    assert [b.name for b in o] == ["broker-a", "broker-b", "b_c.1"]
    assert (o[0].ha_addr, o[0].remoting_addr) == ("10.0.0.1:10912", "10.0.0.1:10911")
    assert (o[1].ha_addr, o[1].remoting_addr) == ("[::1]:20912", "[::2]:30911")
    assert (o[2].ha_addr, o[2].remoting_addr) == ("h.example:3", "h.example:2")


@pytest.mark.parametrize("value, fragment", [
    (None, "is required"),
    ("", "is required"),
    ("10.0.0.1:10912", "is not name=host:haPort"),
    ("broker-a=", "is not name=host:haPort"),
    ("=1.2.3.4:10912", "is not name=host:haPort"),
    ("broker a=1.2.3.4:10912", "broker name 'broker a'"),
    ("broker-a=1.2.3.4", "HA address of broker-a '1.2.3.4'"),
    ("broker-a=1.2.3.4:0", "port in 1..65535"),
    ("broker-a=1.2.3.4:65536", "port in 1..65535"),
    ("broker-a=1.2.3.4:x", "port in 1..65535"),
    ("broker-a=::1:10912", "IPv6 as [addr]:port"),
    ("broker-a=[zz]:10912", "IPv6 as [addr]:port"),
    ("broker-a=1.2.3.4:1", "leaves no remoting port"),
    ("broker-a=1.2.3.4:10912/1.2.3.4", "remoting address of broker-a"),
    ("broker-a=1.2.3.4:10912,broker-a=1.2.3.5:10912", "appears twice"),
])
def test_bad_brokers_name_the_option_and_value(value, fragment):
    opts = {} if value is None else {"brokers": value}
    with pytest.raises(HAReplicaOptionError) as err:
        SourceOptions.from_options(opts)
    assert str(err.value).startswith("option brokers=")
    assert fragment in str(err.value)
    assert err.value.option == "brokers"
    assert isinstance(err.value, ValueError) and isinstance(err.value, HAReplicaError)


def test_starting_offsets_forms():
    assert parse(startingOffsets="LATEST").starting_offsets == "latest"
    assert parse(startingOffsets=" earliest ").starting_offsets == "earliest"
    assert parse(startingOffsets='{"broker-a": 554616}').starting_offsets == {"broker-a": 554616}
    assert parse(startingOffsets='{"broker-a": -2}').starting_offsets == {"broker-a": -2}
    two = SourceOptions.from_options({"brokers": "a=h:2,b=h:4", "startingOffsets": '{"a": 0, "b": -1}'})
    assert two.starting_offsets == {"a": 0, "b": -1}


@pytest.mark.parametrize("value, fragment", [
    ("newest", "must be earliest, latest or a JSON object"),
    ("[1, 2]", "must be earliest, latest or a JSON object"),
    ('{"broker-a": 1', "must be earliest, latest or a JSON object"),
    ('{"broker-b": 1, "broker-a": 1}', "names broker 'broker-b' which is not in brokers"),
    ('{"broker-a": -3}', "must be an integer CommitLog offset"),
    ('{"broker-a": 1.5}', "must be an integer CommitLog offset"),
    ('{"broker-a": "1"}', "must be an integer CommitLog offset"),
    ('{"broker-a": true}', "must be an integer CommitLog offset"),
    ("{}", "has no offset for broker(s) broker-a"),
])
def test_bad_starting_offsets(value, fragment):
    with pytest.raises(HAReplicaOptionError) as err:
        parse(startingOffsets=value)
    assert str(err.value).startswith(f"option startingOffsets={value!r}")
    assert fragment in str(err.value)


@pytest.mark.parametrize("name", ["maxBytesPerTrigger", "connectTimeoutMs", "readTimeoutMs",
                                  "haSendHeartbeatInterval", "arrowMaxRecordsPerBatch", "arrowMaxBytesPerBatch"])
@pytest.mark.parametrize("value, fragment", [("0", "must be >= 1"), ("-5", "must be >= 1"),
                                             ("ten", "must be an integer"), ("1.5", "must be an integer")])
def test_bad_positive_integers(name, value, fragment):
    with pytest.raises(HAReplicaOptionError) as err:
        parse(**{name: value})
    assert str(err.value) == f"option {name}={value!r}: {fragment}"


@pytest.mark.parametrize("name, attr", [("fetchRetries", "fetch_retries"), ("fetchPrefetchChunks", "prefetch_chunks"),
                                        ("maxOutageMs", "max_outage_ms")])
def test_non_negative_integers_may_be_zero_but_not_negative(name, attr):
    assert getattr(parse(**{name: "0"}).fetch, attr) == 0
    assert getattr(parse(**{name: "7"}).fetch, attr) == 7
    with pytest.raises(HAReplicaOptionError, match=rf"option {name}='-1': must be >= 0"):
        parse(**{name: "-1"})
    with pytest.raises(HAReplicaOptionError, match=rf"option {name}='two': must be an integer"):
        parse(**{name: "two"})


def test_prefetch_defaults_to_four_chunks():
    assert parse().fetch.prefetch_chunks == 4


def test_heartbeat_interval_must_stay_below_master_housekeeping():
    with pytest.raises(HAReplicaOptionError, match="haSendHeartbeatInterval='20000'.*haHousekeepingInterval"):
        parse(haSendHeartbeatInterval="20000")


@pytest.mark.parametrize("name", ["failOnDataLoss", "decompressBody"])
@pytest.mark.parametrize("value", ["yes", "1", ""])
def test_bad_booleans(name, value):
    with pytest.raises(HAReplicaOptionError) as err:
        parse(**{name: value})
    assert str(err.value) == f"option {name}={value!r}: must be true or false"


def test_unknown_options_are_rejected_listing_the_known_ones():
    with pytest.raises(HAReplicaOptionError, match=r"option startingoffset='earliest': unknown option; known options: "
                                                   r"brokers, slaves, namesrvAddr, clusterName, namesrvPollIntervalMs, "
                                                   r"newBrokerSetOffsets, dropBrokerSets, readFrom, minInSyncSlaves, "
                                                   r"startingOffsets"):
        parse(startingOffset="earliest")


# --- subscribe, subscribePattern, includeSystemTopics ---------------------------------------------------------
def test_topic_filter_defaults_to_every_user_topic():
    f = TopicFilter.of(parse().decode)
    assert f == TopicFilter(include_system_topics=False) and not f.keeps_everything
    assert f.keep("orders") and f.keep("%RETRY%group-a") and f.keep("%DLQ%group-a")
    assert not f.keep("SCHEDULE_TOPIC_XXXX") and not f.keep("RMQ_SYS_TRANS_HALF_TOPIC") and not f.keep("rmq_sys_x")
    assert TopicFilter.of(parse(includeSystemTopics="true").decode).keeps_everything


def test_topics_option_keeps_exactly_the_named_topics_system_ones_included():
    f = TopicFilter.of(parse(subscribe=" orders , %DLQ%g1,SCHEDULE_TOPIC_XXXX").decode)
    assert f.topics == frozenset({"orders", "%DLQ%g1", "SCHEDULE_TOPIC_XXXX"})
    assert f.keep("orders") and f.keep("SCHEDULE_TOPIC_XXXX") and not f.keep("orders2") and not f.keep("ORDERS")


def test_topic_pattern_matches_whole_names_and_hides_system_topics_unless_asked():
    f = TopicFilter.of(parse(subscribePattern="Order.*").decode)
    assert f.keep("OrderPaid") and not f.keep("xOrderPaid") and not f.keep("order")
    f = TopicFilter.of(parse(subscribePattern=".*TOPIC.*").decode)
    assert f.keep("MY_TOPIC") and not f.keep("RMQ_SYS_TRACE_TOPIC")
    f = TopicFilter.of(parse(subscribePattern=".*TOPIC.*", includeSystemTopics="TRUE").decode)
    assert f.keep("RMQ_SYS_TRACE_TOPIC")


@pytest.mark.parametrize("opts, option, fragment", [
    ({"subscribe": " "}, "subscribe", "names no topic"),
    ({"subscribe": " , ,"}, "subscribe", "names no topic"),
    ({"subscribe": "x,b c"}, "subscribe", "'b c' is not a RocketMQ topic name"),
    ({"subscribe": "t" * 128}, "subscribe", "at most 127 characters"),
    ({"topics": "a"}, "topics", "unknown option"),
    ({"subscribePattern": "(("}, "subscribePattern", "is not a valid regular expression"),
    ({"subscribePattern": " "}, "subscribePattern", "is empty"),
    ({"includeSystemTopics": "yes"}, "includeSystemTopics", "must be true or false"),
    ({"subscribe": ""}, "subscribe", "names no topic"),
    ({"subscribe": "a,b c"}, "subscribe", "'b c' is not a RocketMQ topic name"),
    ({"subscribe": "a", "subscribePattern": "a"}, "subscribe", "give subscribe or subscribePattern, not both"),
    ({"subscribe": "a", "topicPattern": "a"}, "topicpattern", "unknown option"),
    ({"subscribePattern": "("}, "subscribePattern", "is not a valid regular expression"),
])
def test_bad_topic_options(opts, option, fragment):
    with pytest.raises(HAReplicaOptionError) as err:
        parse(**opts)
    assert err.value.option == option and fragment in str(err.value)


# --- slaves, readFrom, minInSyncSlaves --------------------------------------------------------------------
def test_slaves_read_from_and_min_replicas():
    o = SourceOptions.from_options({"brokers": "a=10.0.0.1:10912,b=10.0.0.2:10912",
                                    "slaves": "a=10.0.0.11:10912,a=10.0.0.12:20912/10.0.0.12:20000,b=10.0.0.21:10912",
                                    "readFrom": "SLAVE", "minInSyncSlaves": "1"})
    assert (o.read_from, o.min_in_sync_slaves) == ("slave", 1)
    assert [(s.ha_addr, s.remoting_addr) for s in o.slaves_of("a")] == [("10.0.0.11:10912", "10.0.0.11:10911"),
                                                                        ("10.0.0.12:20912", "10.0.0.12:20000")]
    assert [s.ha_addr for s in o.slaves_of("b")] == ["10.0.0.21:10912"]
    defaults = parse()
    assert (defaults.slaves, defaults.read_from, defaults.min_in_sync_slaves) == ((), "master", 0)


@pytest.mark.parametrize("opts, option, fragment", [
    ({"slaves": "broker-b=1.2.3.4:10912"}, "slaves", "names broker 'broker-b' which is not in brokers"),
    ({"slaves": "broker-a=1.2.3.4"}, "slaves", "HA address of broker-a '1.2.3.4'"),
    ({"slaves": "broker-a=1.2.3.4:10912,broker-a=1.2.3.4:10912"}, "slaves", "HA address 1.2.3.4:10912 appears twice"),
    ({"slaves": ""}, "slaves", "is not name=host:haPort"),
    ({"readFrom": "replica"}, "readFrom", "must be one of master, slave"),
    ({"readFrom": "slave"}, "readFrom", "needs at least one slave of broker broker-a"),
    ({"minInSyncSlaves": "-1"}, "minInSyncSlaves", "must be >= 0"),
    ({"minInSyncSlaves": "x"}, "minInSyncSlaves", "must be an integer"),
    ({"minInSyncSlaves": "2", "slaves": "broker-a=1.2.3.4:10912"}, "minInSyncSlaves",
     "needs at least 2 slave(s) of broker broker-a in the slaves option, found 1"),
    ({"minInSyncSlaves": "-1"}, "minInSyncSlaves", "must be >= 0"),
    ({"minInSyncSlaves": "2", "slaves": "broker-a=1.2.3.4:10912"}, "minInSyncSlaves",
     "needs at least 2 slave(s) of broker broker-a in the slaves option, found 1"),
])
def test_bad_slave_options(opts, option, fragment):
    with pytest.raises(HAReplicaOptionError) as err:
        parse(**opts)
    assert err.value.option == option and fragment in str(err.value), str(err.value)


# --- Kafka source names; the names of no release (topics, topicPattern, minReplicas) are unknown -----------
@pytest.mark.parametrize("name, value", [
    ("subscribe", " orders , %DLQ%g1"), ("subscribePattern", "Order.*"), ("minInSyncSlaves", "1")])
def test_a_name_in_any_case_gives_the_same_options(name, value):
    extra = {"slaves": "broker-a=10.0.0.11:10912"}
    by_name = parse(**{name: value}, **extra)
    assert by_name != parse(**extra)
    assert parse(**{name.upper(): value}, **extra) == by_name  # case-insensitive, as Spark hands them over


@pytest.mark.parametrize("gone", ["topics", "topicPattern", "minReplicas"])
def test_the_former_aliases_are_unknown_options(gone):
    with pytest.raises(HAReplicaOptionError) as err:
        parse(**{gone: "1"}, slaves="broker-a=10.0.0.11:10912")
    assert err.value.option == gone.lower() and "unknown option" in str(err.value)


def test_options_are_frozen_and_picklable():
    import pickle

    o = parse(startingOffsets='{"broker-a": 5}', maxBytesPerTrigger="10", subscribePattern="a.*",
              slaves="broker-a=h:3", minInSyncSlaves="1")
    clone = pickle.loads(pickle.dumps(o))
    assert clone == o and TopicFilter.of(clone.decode).keep("ab") and not TopicFilter.of(clone.decode).keep("b")
    with pytest.raises(AttributeError):
        o.max_bytes_per_trigger = 3  # type: ignore[misc]
    assert o.broker("broker-a").ha_port == 10912
    with pytest.raises(KeyError):
        o.broker("nope")


def test_outage_options_default_to_kafka_backoff_and_five_minutes():
    f = parse().fetch
    assert (f.reconnect_backoff_ms, f.reconnect_backoff_max_ms, f.max_outage_ms) == (50, 1000, 300000)
    f = parse(reconnectBackoffMs="10", reconnectBackoffMaxMs="10", maxOutageMs="60000").fetch
    assert (f.reconnect_backoff_ms, f.reconnect_backoff_max_ms, f.max_outage_ms) == (10, 10, 60000)
    with pytest.raises(HAReplicaOptionError, match=r"option reconnectBackoffMs='0': must be >= 1"):
        parse(reconnectBackoffMs="0")
    with pytest.raises(HAReplicaOptionError, match=r"option reconnectBackoffMaxMs='20': must be >= "
                                                   r"reconnectBackoffMs \(50\)"):
        parse(reconnectBackoffMaxMs="20")
