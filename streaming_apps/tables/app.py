"""``hareplica run tables --config FILE`` on the driver: the declared tables as an app (the interface of
:mod:`streaming_apps.apps`: ``NAME``, ``TABLES``, ``QUERY_NAMES``, ``WORKER_MODULES``, ``start``, ``check_tables``).
One query reads the brokers with ``format("hareplica-landing")``; its tasks decode and write every table and the
dead-letter table (:mod:`streaming_apps.tables.split`), and the driver commits each table once per micro-batch
(its own Delta ``txn``), with one checkpoint for the declaration. docs/tables.md.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pyarrow as pa

from streaming_apps.apps.common import AppConfig, AppError, DeltaSink, trigger_kwargs
from streaming_apps.tables.columns import DEAD_LETTER_SCHEMA, PROPERTY_COLUMN_PREFIX, table_schema
from streaming_apps.tables.declaration import Declaration, DeclarationError, TableSpec, load_declaration
from streaming_apps.tables.decode.base import BodyFormatError, decoder_for
from streaming_apps.tables.decode.json_bodies import INFER

NAME = "tables"
#: The split factory the tasks run (``landingSplit`` with ``landingSplitConfig``).
SPLIT_FACTORY = "streaming_apps.tables.split:make_split"


class TablesApp:
    """The app of one declaration (module docstring). Raises DeclarationError (constructor) for a declaration whose
    schemas the decoders refuse or whose columns clash, naming the file, the table and the key."""

    NAME = NAME
    QUERY_NAMES = ("hareplica-tables",)
    WORKER_MODULES = ("streaming_apps.tables.split",)

    def __init__(self, declaration: Declaration, name: str = NAME):
        self.NAME = name  # the app's name (``run silver`` runs its built-in declaration: streaming_apps.apps.silver)
        self.QUERY_NAMES = (f"hareplica-{name}",)
        #: the tables whose columns come from the data (json ``infer``): connector.landing.evolving
        self.inferred = frozenset(t.name for t in declaration.tables if t.settings.get("schema") == INFER)
        for table in declaration.tables:
            if table.name in self.inferred and table.mode == "upsert":
                raise DeclarationError(f"{declaration.path}: table {table.name}: mode: \"upsert\" needs a declared "
                                       "schema; a table with schema = \"infer\" appends")
        self.declaration = declaration
        self.schemas = {t.name: _arrow_schema(declaration, t) for t in declaration.tables}
        for table in declaration.tables:
            if table.mode == "upsert":
                _check_upsert(declaration, table, self.schemas[table.name])
        self.schemas[declaration.dead_letter_table] = DEAD_LETTER_SCHEMA
        self.TABLES = declaration.table_names

    @classmethod
    def load(cls, path: str | Path) -> TablesApp:
        """The app of the declaration file at ``path`` (:func:`load_declaration`, then the decoders)."""
        return cls(load_declaration(path))

    def partition_by(self, table: str) -> tuple[str, ...]:
        """The partition columns of ``table`` (none for the dead-letter table)."""
        for spec in self.declaration.tables:
            if spec.name == table:
                return spec.partition_by
        return ()

    def upsert_keys(self, table: str) -> tuple[str, ...] | None:
        """The key columns of an upsert ``table``; None for an append table and the dead-letter table."""
        for spec in self.declaration.tables:
            if spec.name == table and spec.mode == "upsert":
                return spec.key
        return None

    def check_tables(self, config: AppConfig, *, evolve: bool = False) -> None:
        """Refuse before Spark starts when a declared table exists with other columns or partitioning than the
        declaration's, apart from declared columns it lacks (schema evolution: :mod:`streaming_apps.tables.evolution`),
        which ``evolve`` adds.

        Raises:
            AppError: one line naming the table and the differences.
        """
        from connector.delta.location import check_new_table_location, open_delta_table
        from connector.errors import DeltaSchemaMismatchError, DeltaTablePathError, UnsupportedTableFeatureError
        from streaming_apps.tables.evolution import added_columns

        for name in self.TABLES:
            uri = str(config.table_path(name))
            try:
                table = open_delta_table(uri)
                if table is None:
                    check_new_table_location(uri)
                elif name in self.inferred:
                    _check_inferred(uri, table, self.schemas[name], self.partition_by(name))
                else:
                    added_columns(uri, self.spark_schema(name), self.partition_by(name), add=evolve)
            except (DeltaSchemaMismatchError, DeltaTablePathError, UnsupportedTableFeatureError) as e:
                raise AppError(f"table {name}: {e}") from None

    def spark_schema(self, table: str):
        """The Spark schema of ``table`` (from its Arrow schema)."""
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self.schemas[table])

    def start(self, spark, config: AppConfig, sink: DeltaSink) -> list:
        """Start the declaration's one query (module docstring); returns ``[StreamingQuery]``."""
        from connector.landing import LandingTarget, start_direct_landing_tables
        from connector.storage import locations

        self.check_tables(config, evolve=True)
        targets = [LandingTarget(str(config.table_path(name)), config.app_id(), self.spark_schema(name),
                                 self.partition_by(name), config.target_file_size,
                                 upsert_keys=self.upsert_keys(name), evolve=name in self.inferred)
                   for name in self.TABLES]
        options = {**config.source_option_map(), **config.storage_option_map(),
                   "subscribe": self.declaration.subscribe}
        return [start_direct_landing_tables(
            spark, options, targets=targets, split=SPLIT_FACTORY, split_config=self.split_config(config),
            checkpoint=locations.for_spark(config.checkpoint()), query_name=self.QUERY_NAMES[0],
            trigger=trigger_kwargs(config.trigger))]

    def split_config(self, config: AppConfig | None = None) -> str:
        """The ``landingSplitConfig`` of the tasks: the declaration with its schema files and each table's Arrow
        schema inside (for an ``infer`` table: the columns every row has), and each ``infer`` table's location
        under ``config``'s tables root (``tableUri``; the tasks pin their decoder to its columns)."""
        import json

        out = json.loads(self.declaration.to_json())
        for entry in out["tables"]:
            schema = self.schemas[entry["name"]]
            entry["arrowSchema"] = base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")
            if entry["name"] in self.inferred and config is not None:
                entry["tableUri"] = str(config.table_path(entry["name"]))
        return json.dumps(out)


def _arrow_schema(declaration: Declaration, table: TableSpec) -> pa.Schema:
    """The table's Arrow schema from its decoder (built here on the driver, as the tasks will)."""
    where = f"{declaration.path}: table {table.name}"
    try:
        fields = decoder_for(table.format, table.settings, declaration.path.parent).schema
    except BodyFormatError as e:
        raise DeclarationError(f"{where}: {e}") from None
    try:
        return table_schema(fields, table.columns, table.partition_by, table.dates)
    except ValueError as e:
        raise DeclarationError(f"{where}: {e}") from None


def _check_inferred(uri: str, table, kept: pa.Schema, partition_by: tuple[str, ...]) -> None:
    """Refuse an existing table of an ``infer`` declaration that lacks one of the RocketMQ columns the declaration
    keeps (or holds it with another type), or is partitioned otherwise. Raises DeltaSchemaMismatchError."""
    from connector.delta.schema_evolution import plain_schema
    from connector.errors import DeltaSchemaMismatchError

    have = plain_schema(pa.schema(table.schema().to_arrow()))
    for f in kept:
        if f.name not in have.names or have.field(f.name).type != f.type:
            found = f"of type {have.field(f.name).type}" if f.name in have.names else "missing"
            raise DeltaSchemaMismatchError(f"Delta table {uri}: column {f.name} ({f.type}) is {found}")
    partitions = tuple(table.metadata().partition_columns)
    if partitions != tuple(partition_by):
        raise DeltaSchemaMismatchError(f"Delta table {uri} is partitioned by {list(partitions)}, the declaration by "
                                       f"{list(partition_by)}")


def _check_upsert(declaration: Declaration, table: TableSpec, schema: pa.Schema) -> None:
    """Refuse an upsert table whose key is not among its columns, is of a nested type, or comes from the body
    while an empty body is its tombstone; or whose columns clash with the staged ones
    (:mod:`connector.landing.upsert`). Raises DeclarationError naming the file, table and key."""
    from connector.landing.upsert import DELETE_COLUMN, ORDER_COLUMN
    from streaming_apps.tables.declaration import EMPTY_BODY

    where = f"{declaration.path}: table {table.name}"
    for key in table.key:
        if key not in schema.names:
            raise DeclarationError(f"{where}: key: {key!r} is not a column of the table (columns: "
                                   f"{', '.join(schema.names)})")
        t = schema.field(key).type
        if pa.types.is_nested(t):
            raise DeclarationError(f"{where}: key: {key!r} is of type {t}: a key column must be a plain value")
    kept = {c[len(PROPERTY_COLUMN_PREFIX):] if c.startswith(PROPERTY_COLUMN_PREFIX) else c for c in table.columns}
    if table.tombstone == EMPTY_BODY:
        from_body = [k for k in table.key if k not in kept]
        if from_body:
            raise DeclarationError(f"{where}: tombstone: an empty body holds no key field {from_body[0]!r}: key a "
                                   "table with empty-body tombstones by kept columns (e.g. [\"keys\"])")
    for name in (ORDER_COLUMN, DELETE_COLUMN):
        if name in schema.names:
            raise DeclarationError(f"{where}: column {name} is reserved for the upsert's staged rows")
