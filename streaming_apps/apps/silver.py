"""The silver app: the tables app (:mod:`streaming_apps.tables.app`) running its built-in declaration of the demo's
msgpack order events, :func:`orders_declaration`: the typed table ``silver_orders`` and the dead-letter table
``silver_quarantine``, landed as ``hareplica run tables`` lands a declaration (``--landing direct``, ``--sink
deltalake``). The demo's ``orders.toml`` is the same declaration. The tables' columns: docs/delta.md "4. The apps",
"silver → tables `silver_orders` and `silver_quarantine`"; the keys: docs/tables.md.
"""

from __future__ import annotations

from pathlib import Path

from streaming_apps.apps.common import AppConfig, AppError
from streaming_apps.workload import ORDER_TOPICS

NAME = "silver"
ORDERS_TABLE = "silver_orders"
QUARANTINE_TABLE = "silver_quarantine"
TABLES = (ORDERS_TABLE, QUARANTINE_TABLE)
QUERY_NAMES = ("hareplica-silver",)
#: The order event's fields (streaming_apps.workload.order_event) as the msgpack decoder's type texts.
ORDER_FIELDS = {"orderId": "string", "customerId": "string", "status": "string", "amountCents": "int64",
                "currency": "string", "region": "string",
                "items": "list<struct<sku: string, qty: int32, priceCents: int64>>", "eventTimeMs": "timestamp[ms]"}
#: The RocketMQ columns kept beside the fields.
KEPT_COLUMNS = ("broker", "topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "tags", "keys",
                "storeTimestamp")
#: source options that choose topics: silver and gold choose them with --topics (AppConfig.topics) instead
TOPIC_OPTIONS = ("subscribe", "topics", "subscribepattern", "topicpattern")


def _toml_list(values) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def orders_declaration(table: str = ORDERS_TABLE, dead_letter_table: str = QUARANTINE_TABLE,
                       topics=ORDER_TOPICS, tags: str = "*") -> str:
    """The declaration (TOML, docs/tables.md) of the demo's order events as the typed table ``table``: the event's
    fields (:data:`ORDER_FIELDS`), the RocketMQ columns :data:`KEPT_COLUMNS`, ``eventDate`` (the UTC day of
    ``eventTimeMs``) as the partition column; ``topics`` (topic names) read with the tag expression ``tags``,
    every other record in ``dead_letter_table``. The silver app's and the demo's (``orders``, ``dead_letters``)."""
    fields = ", ".join(f'{name} = "{text}"' for name, text in ORDER_FIELDS.items())
    return f"""dead_letter_table = "{dead_letter_table}"

[[table]]
name = "{table}"
topics = {_toml_list(topics)}
tags = "{tags}"
format = "msgpack"
fields = {{ {fields} }}
columns = {_toml_list(KEPT_COLUMNS)}
dates = {{ eventDate = "eventTimeMs" }}
partition_by = ["eventDate"]
"""


def refuse_topic_options(config: AppConfig) -> None:
    """Raises AppError when ``--option`` chooses topics (``subscribe``, ``topics``, ``subscribePattern``,
    ``topicPattern``): the silver and gold apps' topics are ``--topics``."""
    options = config.source_option_map()
    chosen = sorted(k for k in options if k.lower() in TOPIC_OPTIONS)
    if chosen:
        raise AppError(f"--option {chosen[0]}={options[chosen[0]]}: the {config.app} app reads the topics of "
                       "--topics (default: the demo's order topics); give them there")


def order_topics(config: AppConfig) -> tuple[tuple[str, ...], str]:
    """``(topics, tag expression)`` of ``--topics`` (default: the workload's order topics, every tag): each entry
    ``TOPIC`` or ``TOPIC:TagA || TagB``.

    Raises:
        AppError: :func:`refuse_topic_options`; entries of different tag expressions (silver's one table has one).
    """
    refuse_topic_options(config)
    entries = [entry.partition(":") for entry in (config.topics or ORDER_TOPICS)]
    tags = {tag.strip() or "*" for _, _, tag in entries}
    if len(tags) > 1:
        raise AppError(f"--topics {','.join(config.topics or ())}: silver's one table reads its topics with one tag "
                       f"expression, got {' and '.join(sorted(tags))}")
    return tuple(topic.strip() for topic, _, _ in entries), tags.pop()


def app(config: AppConfig):
    """The :class:`streaming_apps.tables.app.TablesApp` named ``silver`` of :func:`orders_declaration` for
    ``config``'s topics.

    Raises:
        AppError: :func:`order_topics`'s refusals; a topic name or tag expression the declaration refuses (one
            line naming it).
    """
    from streaming_apps.tables.app import TablesApp
    from streaming_apps.tables.declaration import DeclarationError, parse_declaration

    topics, tags = order_topics(config)
    try:
        return TablesApp(parse_declaration(orders_declaration(topics=topics, tags=tags),
                                           Path(f"<{NAME}'s declaration>")), name=NAME)
    except DeclarationError as e:
        raise AppError(f"--topics: {e}") from None
