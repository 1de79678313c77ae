"""CHECK_CLIENT_CONFIG (46) on the stub (issue 14 §6): what a 4.9.8 consumer asks while starting with a
non-TAG subscription, answered as ClientManageProcessor.checkClientConfig does — SQL92 refused while
``enablePropertyFilter=false``; with it on, refused as unparseable because the stub has no SQL92 filter.
The real-client comparison is tests/interop/test_java_clients_sql_filter.py."""

from __future__ import annotations

import json

from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.brokers import remoting_request


def _check(addr: str, subscription: dict | None) -> tuple[int, str | None]:
    body = b"" if subscription is None else json.dumps(
        {"clientId": "127.0.0.1@sql", "group": "cg_sql", "subscriptionData": subscription}).encode()
    resp = remoting_request(addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=body))
    return resp.code, resp.remark


def _sub(expression_type: str | None, sub_string: str) -> dict:
    return {"topic": "SqlTopic", "subString": sub_string, "expressionType": expression_type, "classFilterMode": False,
            "tagsSet": [], "codeSet": [], "subVersion": 1}


def test_sql92_is_refused_without_enable_property_filter(broker_factory):
    addr = broker_factory("master").remoting_addr
    assert _check(addr, None) == (ResponseCode.SUCCESS, None)
    assert _check(addr, _sub("TAG", "a || b")) == (ResponseCode.SUCCESS, None)
    assert _check(addr, _sub(None, "*")) == (ResponseCode.SUCCESS, None)
    assert _check(addr, _sub("SQL92", "a > 1")) == (
        ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")


def test_with_enable_property_filter_the_stub_cannot_compile_sql92(broker_factory):
    addr = broker_factory("master", enablePropertyFilter=True).remoting_addr
    assert _check(addr, _sub("TAG", "*")) == (ResponseCode.SUCCESS, None)
    assert _check(addr, _sub("SQL92", "a > 1")) == (ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                                    "the broker stub has no SQL92 filter")
