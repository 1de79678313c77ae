"""broker.conf parsing and the RocketMQ 4.9.8 defaults of the broker stub."""

from __future__ import annotations

import pytest

from broker_stub.config import BrokerConfigError, config_from_properties, load_config
from broker_stub.javautil import parse_java_properties

# The master's broker.conf of the golden fixture (tests/fixtures/rocketmq-4.9.8/README.md).
FIXTURE_MASTER_CONF = """\
brokerClusterName=LocalCluster
brokerName=broker-a
brokerIP1=127.0.0.1
brokerIP2=127.0.0.1
namesrvAddr=127.0.0.1:29876
flushDiskType=ASYNC_FLUSH
mappedFileSizeCommitLog=1048576
mappedFileSizeConsumeQueue=60000
maxHashSlotNum=1000
maxIndexNum=4000
autoCreateTopicEnable=true
deleteWhen=04
fileReservedTime=48
brokerId=0
brokerRole=ASYNC_MASTER
listenPort=20911
storePathRootDir=STORE_ROOT/master
storePathCommitLog=STORE_ROOT/master/commitlog
haSendHeartbeatInterval=1000
transactionCheckInterval=2000
transactionTimeOut=3000
"""
# Values that depend on the machine the fixture broker ran on.
MACHINE_DEPENDENT = {"rocketmqHome", "sendMessageThreadPoolNums", "putMessageFutureThreadPoolNums",
                     "pullMessageThreadPoolNums", "processReplyMessageThreadPoolNums", "queryMessageThreadPoolNums",
                     "heartbeatThreadPoolNums", "endTransactionThreadPoolNums", "clientCallbackExecutorThreads"}


def test_every_key_and_value_matches_a_real_4_9_8_broker(fixture_dir):
    """GET_BROKER_CONFIG of the stub equals the real broker's body for the same broker.conf."""
    cfg = config_from_properties(parse_java_properties(FIXTURE_MASTER_CONF))
    ours = cfg.all_properties()
    real = parse_java_properties((fixture_dir / "broker_config.properties").read_text(encoding="utf-8"))
    assert len(real) == 178
    missing = sorted(set(real) - set(ours) - {"rocketmqHome"})
    assert missing == []
    wrong = {k: (v, ours[k]) for k, v in real.items() if k not in MACHINE_DEPENDENT and ours.get(k) != v}
    assert wrong == {}


def test_upstream_defaults_without_a_config_file(tmp_path):
    cfg = config_from_properties({"storePathRootDir": str(tmp_path)})
    assert cfg.listen_port == 10911
    assert cfg.ha_listen_port == 10912
    assert cfg.store.mappedFileSizeCommitLog == 1073741824
    assert cfg.store.flushIntervalCommitLog == 500
    assert cfg.store.flushCommitLogLeastPages == 4
    assert cfg.store.flushCommitLogThoroughInterval == 10000
    assert cfg.store.haSendHeartbeatInterval == 5000
    assert cfg.store.haHousekeepingInterval == 20000
    assert cfg.store.haTransferBatchSize == 32768
    assert cfg.store.maxMessageSize == 4 * 1024 * 1024
    assert cfg.broker.defaultTopicQueueNums == 8
    assert cfg.store.brokerRole == "ASYNC_MASTER" and cfg.store.flushDiskType == "ASYNC_FLUSH"
    assert cfg.store.commit_log_dir == tmp_path / "commitlog"
    assert cfg.broker_ip1 == "127.0.0.1" and cfg.broker_ip2 == "127.0.0.1"
    assert cfg.store_host == "127.0.0.1:10911"
    assert cfg.store.delay_levels_ms()[:3] == [1000, 5000, 10000] and len(cfg.store.delay_levels_ms()) == 18


def test_ha_listen_port_explicit_value_is_honoured_else_listen_port_plus_one():
    assert config_from_properties({"listenPort": "20911"}).ha_listen_port == 20912
    cfg = config_from_properties({"listenPort": "20911", "haListenPort": "30000"})
    assert cfg.ha_listen_port == 30000
    assert cfg.all_properties()["haListenPort"] == "30000"


def test_master_broker_id_is_forced_to_zero():
    assert config_from_properties({"brokerId": "3", "brokerRole": "SYNC_MASTER"}).broker.brokerId == 0


def test_load_config_reads_a_real_broker_conf(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(FIXTURE_MASTER_CONF.replace("STORE_ROOT", str(tmp_path)), encoding="latin-1")
    cfg = load_config(conf)
    assert cfg.broker.brokerClusterName == "LocalCluster"
    assert cfg.store.mappedFileSizeCommitLog == 1048576
    assert cfg.store.commit_log_dir == tmp_path / "master" / "commitlog"
    assert cfg.config_path == conf
    assert cfg.all_properties()["namesrvAddr"] == "127.0.0.1:29876"


def test_unknown_keys_are_kept_for_get_broker_config():
    cfg = config_from_properties({"someFutureKey": "x"})
    assert cfg.all_properties()["someFutureKey"] == "x"


@pytest.mark.parametrize(("props", "message"), [
    ({"brokerRole": "SLAVE", "brokerId": "0"}, "brokerId"),
    ({"brokerRole": "MASTER"}, "brokerRole"),
    ({"haTransferBatchSize": str(4 * 1024 * 1024)}, "haTransferBatchSize"),
    ({"minInSyncSlaves": "0"}, "minInSyncSlaves"),
    ({"inSyncReplicas": "0"}, "minInSyncSlaves"),
    ({"minInSyncSlaves": "2", "inSyncReplicas": "2"}, "config keys minInSyncSlaves and inSyncReplicas: inSyncReplicas "
                                                      "is an alias of minInSyncSlaves; give one"),
    ({"metricsPromExporterPort": "-1"}, "metricsPromExporterPort"),
    ({"flushDiskType": "LAZY"}, "flushDiskType"),
    ({"listenPort": "ten"}, "listenPort"),
    ({"autoCreateTopicEnable": "yes"}, "autoCreateTopicEnable"),
    ({"listenPort": "70000"}, "listenPort"),
    ({"listenPort": "20911", "haListenPort": "20911"}, "haListenPort"),
    ({"mappedFileSizeCommitLog": "100"}, "mappedFileSizeCommitLog"),
    ({"haTransferBatchSize": "0"}, "haTransferBatchSize"),
    ({"messageDelayLevel": "1s 5x"}, "messageDelayLevel"),
    ({"enableDLegerCommitLog": "true"}, "enableDLegerCommitLog"),
])
def test_invalid_configs_are_rejected_naming_the_key(props, message):
    with pytest.raises(BrokerConfigError, match=message):
        config_from_properties(props)


def test_in_sync_replicas_is_an_alias_key_of_min_in_sync_slaves():
    assert config_from_properties({"inSyncReplicas": "2"}).store.minInSyncSlaves == 2
    assert config_from_properties({"minInSyncSlaves": "3"}).store.minInSyncSlaves == 3
    props = config_from_properties({"inSyncReplicas": "2"}).all_properties()
    assert (props["minInSyncSlaves"], props["inSyncReplicas"]) == ("2", "2")  # the file's key is reported too


def test_slave_and_sync_flush_are_accepted_with_upstream_rules():
    cfg = config_from_properties({"brokerRole": "SLAVE", "brokerId": "2", "flushDiskType": "SYNC_FLUSH",
                                  "listenPort": "20911", "haMasterAddress": "127.0.0.1:10912"})
    assert cfg.is_slave and cfg.broker.brokerId == 2 and cfg.store.flushDiskType == "SYNC_FLUSH"
    assert cfg.fixed_ha_master_address == "127.0.0.1:10912"
    assert cfg.vip_listen_port == 20909
    assert cfg.store.minInSyncSlaves == 1 and cfg.store.syncFlushTimeout == 5000
    # a value shorter than 6 characters does not pin the master (BrokerController rule): learned from namesrv
    assert config_from_properties({"brokerRole": "SLAVE", "brokerId": "1",
                                   "haMasterAddress": "x:1"}).fixed_ha_master_address is None


def test_missing_config_file_is_a_clear_error(tmp_path):
    with pytest.raises(BrokerConfigError, match="cannot read broker config"):
        load_config(tmp_path / "nope.conf")
