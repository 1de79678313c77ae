"""``fail_on_data_loss``: what the source does when CommitLog bytes it needs are gone, decided in one place.

The option means what it means in Spark's Kafka source: ``true`` (the default) fails the query with
:class:`DataLossError`, ``false`` logs the loss and goes on. The driver meets lost bytes when retention
deleted files below a batch start, when a broker lost its tail below the checkpoint, and when the history
before a checkpointed offset was rewritten (:mod:`connector.source`); an executor meets them when the
broker deletes or loses bytes while a range is being fetched (:mod:`connector.client.ha`). Each of those
places describes the loss and what going on means there, and calls :func:`on_data_loss`.
"""

from __future__ import annotations

import logging

from connector.errors import DataLossError
from connector.options.declaration import OPTIONS


def on_data_loss(fail_on_data_loss: bool, loss: str, *, instead: str, logger: logging.Logger) -> None:
    """Raise for a loss, or log it and return so the caller goes on.

    Args:
        fail_on_data_loss: the query's ``FetchSettings.fail_on_data_loss`` (``OPTIONS``, connector.options.declaration).
        loss: one sentence naming the broker, the lost range (CommitLog offsets in bytes) and the cause.
        instead: what the caller does when it goes on, as an infinitive without "to"
            (``"skip lost bytes"``); it completes "Set <option>=false to ..." in the error and
            "so the query will ..." in the warning.
        logger: the caller's logger (the warning is logged under the caller's name).

    Raises:
        DataLossError: ``fail_on_data_loss`` is true; the message is ``loss`` plus the hint.
    """
    if fail_on_data_loss:
        raise DataLossError(f"{loss}. Set {OPTIONS.fail_on_data_loss.name}=false to {instead}.")
    logger.warning("%s; %s is false, so the query will %s", loss, OPTIONS.fail_on_data_loss.name, instead)
