"""The failOnDataLoss decision (connector.data_loss.on_data_loss): raise with the hint, or warn and go on."""

import logging

import pytest

from connector.data_loss import on_data_loss
from connector.errors import DataLossError, HAReplicaError

LOSS = "broker broker-a (127.0.0.1:10911) no longer holds CommitLog bytes [5, 9) that the query needs: gone"


def test_fail_raises_the_loss_with_the_option_hint():
    with pytest.raises(DataLossError) as caught:
        on_data_loss(True, LOSS, instead="skip lost bytes", logger=logging.getLogger("t"))
    assert str(caught.value) == f"{LOSS}. Set failOnDataLoss=false to skip lost bytes."
    assert isinstance(caught.value, HAReplicaError)


def test_no_fail_logs_one_warning_under_the_callers_logger_and_returns(caplog):
    with caplog.at_level(logging.WARNING, logger="caller"):
        assert on_data_loss(False, LOSS, instead="skip lost bytes", logger=logging.getLogger("caller")) is None
    [record] = caplog.records
    assert record.name == "caller" and record.levelno == logging.WARNING
    assert record.getMessage() == f"{LOSS}; failOnDataLoss is false, so the query will skip lost bytes"
