"""broker.conf written by the launcher and GET_BROKER_CONFIG bodies are read as java.util.Properties.load
reads them (javaproperties): separators, escapes, continuation lines, trailing blanks, non-ASCII."""

from broker_stub.config import load_config
from broker_stub.javautil import parse_java_properties
from broker_stub.launcher import BrokerProcess
from connector.protocol.remoting import decode_properties_body


def test_launcher_conf_reads_back_every_value_as_written(tmp_path):
    props = {"brokerName": "broker-a", "listenPort": "20911", "namesrvAddr": "127.0.0.1:9876;[::1]:9876",
             "storePathRootDir": str(tmp_path / "store dir"), "messageDelayLevel": "1s 5s 10s",
             "brokerClusterName": " Clüster\\1 ", "unknownKey": "a:b#c=d"}
    broker = BrokerProcess(tmp_path, props, auto_ports=False)
    broker._write_conf()
    assert parse_java_properties(broker.conf_path.read_bytes().decode("latin-1")) == props
    cfg = load_config(broker.conf_path)
    assert cfg.broker.brokerClusterName == " Clüster\\1 " and cfg.file_properties["unknownKey"] == "a:b#c=d"


def test_get_broker_config_body_is_read_as_properties_load_reads_it():
    body = b"a=1  \nb : 2\n# comment\n! comment\nc = x\\\n    y\nd\\u00e9=\\u00e9\nnoValue\n"
    assert decode_properties_body(body) == {"a": "1  ", "b": "2", "c": "xy", "dé": "é", "noValue": ""}
