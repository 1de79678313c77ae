"""Discovery through a name server (issue 43, docs/source.md "Discovery"): the ClusterInfo body decoder, the
name-server client trying addresses in turn, and :class:`connector.source.driver.discovery.Discovery` against a
real stub name server with real stub brokers registered."""

from __future__ import annotations

import socket

import pytest

from broker_stub.namesrv.route_info import RouteInfoManager
from connector.client.namesrv import NameServerClient
from connector.errors import AddressError, HAReplicaOptionError, NameServerError, RemotingProtocolError
from connector.options.parse import SourceOptions
from connector.protocol.cluster_info import decode_cluster_info, fastjson_body, split_namesrv_addr
from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.source.driver.discovery import Discovery, diff
from connector.source.driver.offsets import SourceOffset
from tests.support.brokers import free_port, max_offset, wait_for
from tests.support.fixtures import broker_factory, namesrv_factory  # noqa: F401 - fixtures

offset = SourceOffset.from_json  # the planner takes offsets as SourceOffset; these tests write them as Spark's JSON

COMMON = {"mappedFileSizeCommitLog": 65536, "haSendHeartbeatInterval": 300}


class _Peer:
    peer_text = "127.0.0.1:1"


def _register(manager: RouteInfoManager, cluster: str, name: str, broker_id: int, addr: str) -> None:
    request = RemotingCommand.request(RequestCode.REGISTER_BROKER, {
        "brokerAddr": addr, "brokerId": str(broker_id), "brokerName": name, "clusterName": cluster,
        "haServerAddr": addr, "compressed": "false", "bodyCrc32": "0"})
    manager.register_broker(_Peer(), request)


def test_cluster_info_body_as_the_stub_name_server_writes_it_decodes():
    manager = RouteInfoManager()
    _register(manager, "c1", "broker-a", 0, "10.0.0.1:10911")
    _register(manager, "c1", "broker-a", 1, "10.0.0.2:10911")
    _register(manager, "c2", "broker-b", 0, "10.0.0.3:10911")
    body = manager.get_broker_cluster_info(_Peer(), RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)).body
    assert b'{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in body  # fastjson's bare Long keys: not strict JSON
    info = decode_cluster_info(body)
    a = info.broker_addr_table["broker-a"]
    assert (a.cluster, a.master_addr, a.slave_addrs) == ("c1", "10.0.0.1:10911", ("10.0.0.2:10911",))
    assert info.broker_addr_table["broker-b"].broker_addrs == {0: "10.0.0.3:10911"}
    assert info.cluster_addr_table == {"c1": ("broker-a",), "c2": ("broker-b",)}


def test_fastjson_body_quotes_bare_keys_only_outside_strings():
    assert fastjson_body('{"a":{0:"x:1",-1:"{2:3}"},"b":[1, 2]}') == {"a": {"0": "x:1", "-1": "{2:3}"},
                                                                       "b": [1, 2]}
    with pytest.raises(RemotingProtocolError, match="not JSON"):
        fastjson_body(b'{"a":')
    with pytest.raises(RemotingProtocolError, match=r"brokerAddrTable.broker-a.brokerAddrs has brokerId 'x'"):
        decode_cluster_info(b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{"x":"h:1"}}},"clusterAddrTable":{}}')


def test_namesrv_addr_is_split_at_semicolons_and_each_entry_checked():
    assert split_namesrv_addr(" 10.0.0.1:9876; [::1]:9877 ;") == ("10.0.0.1:9876", "[::1]:9877")
    with pytest.raises(AddressError, match="'10.0.0.2'"):
        split_namesrv_addr("10.0.0.1:9876;10.0.0.2")


def _dead_addr() -> str:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_client_tries_the_name_servers_in_turn_and_names_each_failure(namesrv_factory):  # noqa: F811 - the fixtures imported above
    ns = namesrv_factory()
    dead = _dead_addr()
    with NameServerClient((dead, ns.addr), timeout_ms=2000) as client:
        addr, info = client.cluster_info()
        assert addr == ns.addr and info.broker_addr_table == {}
        assert client.cluster_info()[0] == ns.addr  # the one that answered is asked first
    other = _dead_addr()
    with NameServerClient((dead, other), timeout_ms=2000) as client, pytest.raises(NameServerError) as err:
        client.cluster_info()
    message = str(err.value)
    assert "\n" not in message and f"{dead}: " in message and f"{other}: " in message, message


def _options(ns_addr: str, **extra: str) -> SourceOptions:
    return SourceOptions.from_options({"namesrvAddr": ns_addr, **extra})


def test_discovery_finds_every_set_with_the_ha_port_each_broker_reports(broker_factory, namesrv_factory):  # noqa: F811 - the fixtures imported above
    ns = namesrv_factory()
    ha_b = free_port()  # broker-b's HA port is not listenPort + 1: discovery must take the broker's word
    a = broker_factory("a", namesrvAddr=ns.addr, brokerClusterName="east", **COMMON)
    a_slave = broker_factory("a-slave", namesrvAddr=ns.addr, brokerClusterName="east", brokerRole="SLAVE",
                             brokerId=1, **COMMON)
    b = broker_factory("b", namesrvAddr=ns.addr, brokerClusterName="west", brokerName="broker-b",
                       haListenPort=ha_b, **COMMON)
    assert b.ha_port == ha_b and ha_b != b.listen_port + 1
    wait_for(lambda: _route_names(ns.addr) == {"broker-a", "broker-b"}, "both sets registered")
    discovery = Discovery(_options(ns.addr, readFrom="slave"))
    wait_for(lambda: discovery.poll(force=True) is not None and len(discovery.live_names()) == 2
             and discovery.sets["broker-a"].slaves, "both sets and broker-a's slave in the route")
    try:
        sets = discovery.sets
        assert sets["broker-a"].master.ha_addr == a.ha_addr and sets["broker-a"].master.remoting_addr == a.remoting_addr
        assert [s.ha_addr for s in sets["broker-a"].slaves] == [a_slave.ha_addr]
        assert sets["broker-b"].master.ha_addr == b.ha_addr and sets["broker-b"].cluster == "west"
        with pytest.raises(HAReplicaOptionError, match="needs at least one slave of broker broker-b in the route"):
            discovery.live_route()  # readFrom=slave, and broker-b has none
    finally:
        discovery.close()

    only_east = Discovery(_options(ns.addr, clusterName="east"))
    only_east.poll()
    route = only_east.live_route()
    assert [(e.name, e.ha_addr) for e in route.brokers] == [("broker-a", a.ha_addr)]
    assert route.slaves_of("broker-a")[0].ha_addr == a_slave.ha_addr
    assert only_east.poll() is None  # within namesrvPollIntervalMs: not asked again
    only_east.close()

    unknown = Discovery(_options(ns.addr, clusterName="east,north"))
    with pytest.raises(HAReplicaOptionError) as err:
        unknown.poll()
    assert "knows no cluster north" in str(err.value) and "east" in str(err.value) and "west" in str(err.value)
    unknown.close()


def test_a_set_that_leaves_the_route_is_reported_left_then_appeared(broker_factory, namesrv_factory):  # noqa: F811 - the fixtures imported above
    ns = namesrv_factory()
    empty = Discovery(_options(ns.addr))
    with pytest.raises(NameServerError, match=f"name server {ns.addr} has no broker set in its route"):
        empty.poll()
    empty.close()
    b = broker_factory("b", namesrvAddr=ns.addr, brokerName="broker-b", **COMMON)
    wait_for(lambda: _route_names(ns.addr) == {"broker-b"}, "broker-b registered")
    discovery = Discovery(_options(ns.addr))
    wait_for(lambda: discovery.poll(force=True) and discovery.live_names() == ["broker-b"], "broker-b registered")
    b.stop()  # its registration connection closes: the name server drops it (onChannelDestroy)
    changes = []
    wait_for(lambda: changes.append(discovery.poll(force=True)) or changes[-1].left == ("broker-b",), "broker-b gone")
    assert discovery.live_names() == [] and discovery.seen["broker-b"].master.ha_addr == b.ha_addr
    b.restart()
    wait_for(lambda: changes.append(discovery.poll(force=True)) or changes[-1].appeared == ("broker-b",),
             "broker-b back")
    assert diff(discovery.sets, discovery.sets).__bool__() is False
    discovery.close()


@pytest.mark.parametrize("options, fragment", [
    ({}, "option brokers=(missing): is required unless namesrvAddr is given"),
    ({"namesrvAddr": "h:9876", "brokers": "broker-a=h:10912"}, "give brokers or namesrvAddr, not both"),
    ({"namesrvAddr": "h:9876", "slaves": "broker-a=h:10922"}, "option slaves='broker-a=h:10922': cannot be given "
                                                             "with namesrvAddr"),
    ({"brokers": "broker-a=h:10912", "clusterName": "c"}, "option clusterName='c': needs namesrvAddr"),
    ({"namesrvAddr": "h:9876;h"}, "option namesrvAddr='h:9876;h': name server address 'h' is not host:port"),
    ({"namesrvAddr": "h:9876", "clusterName": " , "}, "option clusterName=' , ': names nothing"),
    ({"namesrvAddr": "h:9876", "namesrvPollIntervalMs": "0"}, "option namesrvPollIntervalMs='0': must be >= 1"),
    ({"namesrvAddr": "h:9876", "newBrokerSetOffsets": "middle"}, "must be one of earliest, latest"),
])
def test_name_server_options_fail_in_one_line_naming_the_option(options, fragment):
    with pytest.raises(HAReplicaOptionError) as err:
        SourceOptions.from_options(options)
    assert fragment in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_name_server_options_parse_into_the_source_options():
    o = SourceOptions.from_options({"namesrvaddr": "10.0.0.1:9876;10.0.0.2:9876", "clusterName": "east, west",
                                    "namesrvPollIntervalMs": "1000", "newBrokerSetOffsets": "LATEST",
                                    "startingOffsets": '{"broker-z": 0}'})
    assert (o.namesrv_addr, o.cluster_names, o.namesrv_poll_interval_ms, o.new_broker_set_offsets, o.brokers) == (
        ("10.0.0.1:9876", "10.0.0.2:9876"), ("east", "west"), 1000, "latest", ())
    assert o.starting_offsets == {"broker-z": 0}  # checked against the discovered sets when the query starts


def test_hareplica_run_and_status_take_namesrv_addr(broker_factory, namesrv_factory, tmp_path, capsys):  # noqa: F811
    from streaming_apps.apps.common import AppConfig
    from streaming_apps.cli import build_parser, main
    from streaming_apps.status import collect_status

    args = build_parser().parse_args(["run", "bronze", "--namesrv-addr", "10.0.0.1:9876;10.0.0.2:9876"])
    config = AppConfig(app="bronze", brokers=args.brokers or "", namesrv_addr=args.namesrv_addr, workdir=tmp_path)
    options = config.source_option_map()
    assert options["namesrvAddr"] == "10.0.0.1:9876;10.0.0.2:9876" and "brokers" not in options
    with pytest.raises(SystemExit):  # one of the two, never both
        build_parser().parse_args(["run", "bronze", "--namesrv-addr", "h:1", "--brokers", "broker-a=h:10912"])

    ns = namesrv_factory()
    a = broker_factory("a", namesrvAddr=ns.addr, brokerClusterName="east", **COMMON)
    a_slave = broker_factory("a-slave", namesrvAddr=ns.addr, brokerClusterName="east", brokerRole="SLAVE",
                             brokerId=1, **COMMON)
    wait_for(lambda: collect_status([tmp_path], namesrv_addr=ns.addr).get("brokerSets", {}).get(
        "broker-a", {}).get("slaves"), "broker-a and its slave in the route")
    status = collect_status([tmp_path], namesrv_addr=ns.addr)
    assert status["brokerSets"] == {"broker-a": {
        "cluster": "east", "master": f"{a.ha_addr}/{a.remoting_addr}",
        "slaves": [f"{a_slave.ha_addr}/{a_slave.remoting_addr}"], "readFrom": f"{a.ha_addr}/{a.remoting_addr}"}}
    assert status["brokers"] == {"broker-a": 0}  # the master's commitLogMaxOffset now
    # no progress recorded yet: the sets and their max offsets are shown, exit 0 (before: no offsets, exit 1)
    assert main(["status", str(tmp_path), "--namesrv-addr", ns.addr]) == 0
    out = capsys.readouterr().out
    assert "no progress recorded" in out and "broker broker-a: commitLogMaxOffset 0" in out, out
    assert main(["status", str(tmp_path), "--namesrv-addr", ns.addr, "--prometheus"]) == 0
    assert 'hareplica_broker_commitlog_max_offset_bytes{broker="broker-a"} 0.0' in capsys.readouterr().out
    main(["status", str(tmp_path), "--namesrv-addr", ns.addr])
    out = capsys.readouterr().out
    assert f"broker set broker-a (cluster east): read from {a.ha_addr}/{a.remoting_addr}; slaves " \
           f"{a_slave.ha_addr}/{a_slave.remoting_addr}" in out.replace("\n", ""), out


def test_hareplica_read_takes_namesrv_addr_and_names_a_dead_name_server_in_one_line(capsys):
    from streaming_apps.cli import build_parser, main
    from streaming_apps.read_command import source_options

    args = build_parser().parse_args(["read", "--namesrv-addr", "10.0.0.1:9876;10.0.0.2:9876"])
    options = source_options(args)
    assert options["namesrvAddr"] == "10.0.0.1:9876;10.0.0.2:9876" and "brokers" not in options
    with pytest.raises(SystemExit):  # one of the two, never both
        build_parser().parse_args(["read", "--namesrv-addr", "h:1", "--brokers", "broker-a=h:10912"])
    capsys.readouterr()  # argparse's usage lines
    dead = _dead_addr()
    assert main(["read", "--namesrv-addr", dead, "--option", "connectTimeoutMs=500"]) == 2  # before Spark starts
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and dead in err[0], err


def test_a_json_starting_offset_must_name_exactly_the_sets_of_the_route(broker_factory, namesrv_factory):  # noqa: F811
    from connector.source.driver.batches import BatchPlanner

    ns = namesrv_factory()
    broker_factory("a", namesrvAddr=ns.addr, **COMMON)
    wait_for(lambda: _route_names(ns.addr) == {"broker-a"}, "broker-a registered")
    planner = BatchPlanner(_options(ns.addr, startingOffsets='{"broker-a": 0, "broker-z": 0}'))
    try:
        with pytest.raises(HAReplicaOptionError, match=r"must name exactly the broker sets of name server .*'s route "
                                                       r"\(broker-a\): unknown broker-z"):
            planner.initial_offsets()
    finally:
        planner.close()
    planner = BatchPlanner(_options(ns.addr, startingOffsets='{"broker-a": -2}'))
    try:
        assert planner.initial_offsets() == {"broker-a": 0}
    finally:
        planner.close()


@pytest.mark.parametrize("option", ["startingOffsetsByTimestamp", "endingOffsets", "endingOffsetsByTimestamp"])
def test_the_other_per_set_json_options_must_name_exactly_the_sets_of_the_route(broker_factory, namesrv_factory,  # noqa: F811
                                                                                option):
    """Before, a name the route does not have was ignored and a set the JSON left out took the default."""
    from connector.source.driver.batches import BatchPlanner
    from connector.source.driver.ranges import ending_offsets

    ns = namesrv_factory()
    broker_factory("a", namesrvAddr=ns.addr, **COMMON)
    broker_factory("b", namesrvAddr=ns.addr, brokerName="broker-b", **COMMON)
    wait_for(lambda: _route_names(ns.addr) == {"broker-a", "broker-b"}, "both sets registered")
    for value, fragment in (('{"broker-a": 0, "broker-z": 0}', "unknown broker-z; missing broker-b"),
                            ('{"broker-a": 0}', "missing broker-b")):
        planner = BatchPlanner(_options(ns.addr, **{option: value}))
        try:
            with pytest.raises(HAReplicaOptionError) as err:
                start = planner.initial_offsets()
                ending_offsets(planner, start)
        finally:
            planner.close()
        assert str(err.value).startswith(f"option {option}=") and str(err.value).endswith(
            f"must name exactly the broker sets of name server {ns.addr}'s route (broker-a, broker-b): {fragment}")
    planner = BatchPlanner(_options(ns.addr, startingOffsetsByTimestampStrategy="latest",  # the sets are empty
                                    **{option: '{"broker-a": 0, "broker-b": 0}'}))
    try:
        start = planner.initial_offsets()
        assert set(ending_offsets(planner, start)) == {"broker-a", "broker-b"}
    finally:
        planner.close()


def _route_names(ns_addr: str) -> set[str]:
    with NameServerClient((ns_addr,)) as client:
        return set(client.cluster_info()[1].broker_addr_table)


def test_the_last_route_is_kept_while_no_name_server_answers(broker_factory, namesrv_factory):  # noqa: F811
    from connector.source.driver.brokers import BrokerSets

    ns = namesrv_factory()
    broker_factory("a", namesrvAddr=ns.addr, **COMMON)
    wait_for(lambda: _route_names(ns.addr) == {"broker-a"}, "broker-a registered")
    options = _options(ns.addr, namesrvPollIntervalMs="1", connectTimeoutMs="500", readTimeoutMs="500")
    discovery, brokers = Discovery(options), BrokerSets(options)
    try:
        planned = discovery.follow(brokers)
        assert planned.broker_names == ["broker-a"]
        ns.stop()
        wait_for(lambda: discovery.due() or None, "the poll interval to pass", timeout_s=5)  # 1 ms
        assert discovery.follow(brokers) is planned  # logged, not raised
    finally:
        discovery.close()
        brokers.close()


def test_discovery_updates_the_route_the_driver_holds_not_the_users_options(broker_factory,  # noqa: F811
                                                                            namesrv_factory):  # noqa: F811
    """Issue 54: the sets discovery finds become the planner's route (``BatchPlanner.route``, the BrokerSets'
    too); the options the user gave stay the very object given, without brokers or slaves."""
    from connector.source.driver.batches import BatchPlanner

    ns = namesrv_factory()
    a = broker_factory("a", namesrvAddr=ns.addr, **COMMON)
    wait_for(lambda: _route_names(ns.addr) == {"broker-a"}, "broker-a registered")
    options = _options(ns.addr)
    planner = BatchPlanner(options)
    try:
        planner.initial_offsets()
        assert planner.options is options and planner.brokers.options is options
        assert (options.brokers, options.slaves) == ((), ())
        assert [(b.name, b.remoting_addr) for b in planner.route.brokers] == [("broker-a", a.remoting_addr)]
        assert planner.brokers.route is planner.route
    finally:
        planner.close()


def test_a_master_moved_while_the_planner_waits_on_the_old_one_is_followed_at_once(broker_factory, namesrv_factory,  # noqa: F811
                                                                                  tmp_path):
    """The old master stopped and a new one, on other ports, started on the same store: the planner, waiting on
    the old master within a planning call, asks the route again and goes on from the new one. Before, it asked the
    route only between micro-batches (every namesrvPollIntervalMs) and waited out maxOutageMs on the old master."""
    from broker_stub.launcher import BrokerProcess
    from connector.client.producer import Producer
    from connector.source.driver.batches import BatchPlanner

    ns = namesrv_factory()
    old = broker_factory("a", namesrvAddr=ns.addr, **COMMON)
    with Producer(old.remoting_addr, timeout_ms=15000) as producer:
        for i in range(20):
            producer.send("MovedTopic", b"before %d" % i)
    wait_for(lambda: _route_names(ns.addr) == {"broker-a"}, "broker-a registered")
    planner = BatchPlanner(_options(ns.addr, namesrvPollIntervalMs="600000", maxOutageMs="20000",
                                    connectTimeoutMs="500", readTimeoutMs="2000"))
    new = None
    try:
        start = planner.initial_offsets()
        first = planner.end_offset(offset(start), None).to_json()
        assert first["broker-a"] == max_offset(old.remoting_addr) > start["broker-a"]
        old.stop()
        new = BrokerProcess.start(tmp_path / "a-moved", namesrvAddr=ns.addr, storePathRootDir=str(old.store_dir),
                                  **COMMON)
        assert new.remoting_addr != old.remoting_addr
        with Producer(new.remoting_addr, timeout_ms=15000) as producer:
            for i in range(20):
                producer.send("MovedTopic", b"after %d" % i)
        wait_for(lambda: _master_of(ns.addr, "broker-a") == new.remoting_addr, "the moved master registered")
        # raised BrokerUnreachableError after maxOutageMs before
        second = planner.end_offset(offset(first), None).to_json()
        assert second["broker-a"] == max_offset(new.remoting_addr) > first["broker-a"]
        assert [b.remoting_addr for b in planner.route.brokers] == [new.remoting_addr]
    finally:
        planner.close()
        if new is not None:
            new.stop()


def _master_of(ns_addr: str, name: str) -> str | None:
    with NameServerClient((ns_addr,)) as client:
        data = client.cluster_info()[1].broker_addr_table.get(name)
    return None if data is None else data.broker_addrs.get(0)


def test_a_new_set_started_at_latest_is_replayed_from_the_same_offset_after_a_driver_restart(
        broker_factory, namesrv_factory):  # noqa: F811 - the fixtures imported above
    """newBrokerSetOffsets=latest: broker-b joins, is started at its commitLogMaxOffset M, and grows before the batch
    that reads it from M is planned. A restarted driver replaying that batch (Spark hands it the same start and end)
    plans broker-b from M. Before, the restarted planner took broker-b's commitLogMaxOffset again, past the batch's
    end, and the batch read nothing of broker-b: [M, end) was lost."""
    from connector.client.producer import Producer
    from connector.source.driver.batches import BatchPlanner
    from connector.source.driver.discovery import NEW_SET_STARTS_KEY

    ns = namesrv_factory()
    a = broker_factory("a", namesrvAddr=ns.addr, **COMMON)
    with Producer(a.remoting_addr, timeout_ms=15000) as producer:
        producer.send("LatestTopic", b"on a")
    wait_for(lambda: _route_names(ns.addr) == {"broker-a"}, "broker-a registered")
    options = _options(ns.addr, newBrokerSetOffsets="latest", namesrvPollIntervalMs="1")
    planner = BatchPlanner(options)
    try:
        first = planner.end_offset(offset(planner.initial_offsets()), None).to_json()
        assert "broker-b" not in first
        b = broker_factory("b", namesrvAddr=ns.addr, brokerName="broker-b", **COMMON)
        with Producer(b.remoting_addr, timeout_ms=15000) as producer:
            producer.send("LatestTopic", b"on b, before it joined the query")
        wait_for(lambda: _route_names(ns.addr) == {"broker-a", "broker-b"}, "broker-b registered")
        joined = max_offset(b.remoting_addr)
        # broker-b starts at its max offset
        assert planner.end_offset(offset(first), None).positions["broker-b"] == joined
        with Producer(b.remoting_addr, timeout_ms=15000) as producer:
            for i in range(5):
                producer.send("LatestTopic", b"on b %d" % i)
        second = planner.end_offset(offset(first), None).to_json()
        assert second["broker-b"] == max_offset(b.remoting_addr) > joined
        assert second[NEW_SET_STARTS_KEY] == {"broker-b": joined}
        planned = [(p.start, p.end) for p in planner.partitions(offset(first), offset(second), None)
                   if p.broker == "broker-b"]
    finally:
        planner.close()
    with Producer(b.remoting_addr, timeout_ms=15000) as producer:
        producer.send("LatestTopic", b"on b, after the driver died")
    restarted = BatchPlanner(options)  # the restarted driver: Spark replays [first, second) from its offset log
    try:
        replayed = [(p.start, p.end) for p in restarted.partitions(offset(first), offset(second), None)
                    if p.broker == "broker-b"]
    finally:
        restarted.close()
    assert planned[0][0] == joined and planned[-1][1] == second["broker-b"]
    assert replayed == planned
