"""The real-peer launcher's own contract: missing jars fail with what to run; signals and restart work."""

from __future__ import annotations

import pytest

from tests.support.brokers import runtime_info, wait_for
from tests.support.jvm_peers import JvmPeersMissing, RealBroker, rocketmq_classpath


def test_missing_jars_fail_with_what_to_run(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "rocketmq-store-4.9.8.jar").write_bytes(b"")
    with pytest.raises(JvmPeersMissing, match=r"rocketmq-broker.*run `make jvm-peers`"):
        rocketmq_classpath(tmp_path / "lib")
    with pytest.raises(JvmPeersMissing, match="make jvm-peers"):
        rocketmq_classpath(tmp_path / "absent")


def test_staged_jars_are_found():
    assert rocketmq_classpath().endswith("/*")


def test_real_broker_boots_freezes_and_restarts_on_its_store(tmp_path, real_namesrv):
    with RealBroker.start(tmp_path / "b", namesrvAddr=real_namesrv.addr, mappedFileSizeCommitLog=1 << 20) as b:
        assert runtime_info(b.remoting_addr)["commitLogMaxOffset"] == "0"
        assert b.logback_log.exists() and "boot success" in b.log_path.read_text()
        b.sigstop()
        with pytest.raises(AssertionError, match="timed out"):
            wait_for(lambda: runtime_info(b.remoting_addr), "a frozen broker to answer", timeout_s=1.0)
        b.sigcont()
        wait_for(lambda: runtime_info(b.remoting_addr), "the resumed broker to answer")
        b.kill9()
        assert (b.store_dir / "abort").exists()
        b.restart()
        assert runtime_info(b.remoting_addr)["commitLogMaxOffset"] == "0"
    assert not b.is_running()
