"""Typed landing (`run tables`) beside bronze on the same CommitLog; Spark's `from_avro` beside the tasks' decoder.

``flock /tmp/hareplica-heavy.lock .venv/bin/python -m bench.tables [--quick] [--mib N] [--rounds N]``; results in
``bench/results/tables.json`` (``tables_quick.json``). The method, every figure and the latest results:
docs/performance.md "Typed tables: `bench/tables.py`".

1. **Typed landing beside bronze.** One broker stub per format (Avro, Protobuf; 64 MiB mapped files), each filled
   with ``--mib`` MiB of CommitLog of one topic whose ~1 KiB bodies are bench.tables_decode's payment event
   (14 fields, three order items, a padding note) encoded by the format's own library (fastavro, protobuf).
   Then, in interleaved rounds (per round and format: bronze, then typed), a cold ``hareplica run bronze`` and a cold
   ``hareplica run tables --config`` of one table of that format (its fields plus ``keys``, ``storeTimestamp`` and
   ``commitLogOffset``, partitioned by ``storeDate`` as bronze), both ``--trigger available-now
   --max-bytes-per-trigger 128 MiB``, each into a new workdir. Per run, from its progress file: the data phase
   (first micro-batch with rows' trigger to the end of the last one) and its rows/s, the steady rows/s (the
   micro-batches after the first: Python workers up and imported), CPU seconds by process kind in the data phase
   (bench.object_store.KindSampler) and the Python workers' peak RSS (VmHWM). Medians over the rounds;
   ``FMT_typed_vs_bronze`` is the median of the rounds' ratios.
2. **Where to decode.** Spark in this process (``local[2]``) reads the Avro bronze table of round 0 (its Parquet
   files: the rows' ``body``, ``keys``, ``storeTimestamp``, ``commitLogOffset``) and writes the typed rows with
   Spark's Parquet writer three ways, interleaved over the rounds after one uncounted warm-up round: ``copy`` (the
   body as it is: reading and writing alone), ``from_avro`` (Spark's own ``from_avro(body, schema)``, the
   spark-avro jar ``make jvm-peers`` stages) and ``task_decoder`` (the typed tables' decoder, fastavro, in the
   Python workers through ``mapInArrow``). Same input, same writer: only where and how the body is decoded
   differs. Protobuf is not compared: the spark-protobuf jar is not staged (not reachable from this project's
   Maven repository).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import report
from bench.object_store import MAX_BYTES_PER_TRIGGER, PROC_KINDS, _max_offset, data_phase, run_bronze

MIB = 1024 * 1024
MAPPED_FILE_SIZE = 64 * MIB
FORMATS = ("avro", "protobuf")
TOPIC = "BenchPayments"
KEEP = ("keys", "storeTimestamp", "commitLogOffset")
GOAL_RATIO = 0.7
GOAL_ROWS_S = 120_000
GOAL_WORKER_RSS_MIB = 256
SPARK_VARIANTS = ("copy", "from_avro", "task_decoder")
ROOT = Path(__file__).resolve().parents[1]
SPARK_AVRO_JARS = ROOT / ".jvm" / "spark-decoders" / "lib"


# --- the data ------------------------------------------------------------------------------------------------
def body_maker(fmt: str, folder: Path):
    """``(body(seq) -> bytes, mean body bytes of a sample)``: the payment event ``seq`` of bench.tables_decode encoded
    in ``fmt`` with its note padding it to about 1 KiB; writes the format's schema files into ``folder``."""
    from bench.tables_decode import encoders, event, files

    _, avro, proto = files(folder)
    encode = encoders(avro, proto)[fmt]
    rng = random.Random(7)
    pad = 1024 - len(encode(event(rng, 0, 0)))
    sample = [len(encode(event(rng, i, pad))) for i in range(1000)]
    return (lambda seq: encode(event(rng, seq, pad))), round(statistics.mean(sample), 1)


def declaration(folder: Path, fmt: str) -> Path:
    """A declaration of one table ``payments`` of ``fmt`` (schema files written by bench.tables_decode.files into
    ``folder``): the body's fields, :data:`KEEP`, partitioned by ``storeDate``. Returns the TOML file's path."""
    from bench.tables_decode import files

    settings = files(folder)[0][fmt]
    lines = ["[[table]]", 'name = "payments"', f'topics = ["{TOPIC}"]', f'format = "{fmt}"',
             f'schema = "{settings["schema"]}"']
    if "message" in settings:
        lines.append(f'message = "{settings["message"]}"')
    lines += [f"columns = {json.dumps(list(KEEP))}", 'partition_by = ["storeDate"]']
    path = folder / f"{fmt}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def table_rows(path: Path) -> int:
    """Rows of the Delta table at ``path`` (its add actions' record counts); 0 when there is no table."""
    from deltalake import DeltaTable

    if not (path / "_delta_log").exists():
        return 0
    actions = DeltaTable(str(path)).get_add_actions(flatten=True)
    return int(sum(actions.column("num_records").to_pylist()))


# --- part 1: one cold run ------------------------------------------------------------------------------------
def app_run(broker, root: Path, fmt: str, app: str, i: int, decl: Path, messages: int) -> dict:
    """One cold ``run bronze`` or ``run tables --config decl`` (``app``) over the whole log of ``broker``, into
    ``root/FMT-APP-I``: rows, data seconds, rows/s, steady rows/s (micro-batches after the first), data-phase
    CPU seconds by kind, the Python workers' peak RSS (MiB). Raises RuntimeError when rows are missing."""
    workdir = root / f"{fmt}-{app}-{i}"
    os.sync()  # the previous run's dirty pages written back before this one starts (bench.catchup.settle)
    extra = ("--config", str(decl)) if app == "tables" else ()
    run = run_bronze(None, broker, str(workdir), env={}, cwd=root, max_bytes=MAX_BYTES_PER_TRIGGER,
                     sampler_extra={"broker": broker.pid}, extra=extra, app=app)
    rows, start, stop = data_phase(run["events"])
    with_rows = [e for e in run["events"] if (e.get("numInputRows") or 0) > 0]
    from bench.object_store import _parse_time

    rest = with_rows[1:]
    steady = (sum(int(e["numInputRows"]) for e in rest) / (stop - _parse_time(rest[0]["time"]))) if rest else 0.0
    table = workdir / "tables" / ("bronze" if app == "bronze" else "payments")
    landed = table_rows(table)
    dead = table_rows(workdir / "tables" / "dead_letters") if app == "tables" else 0
    if rows != messages or landed != messages or dead:
        raise RuntimeError(f"{fmt} {app} round {i}: read {rows} rows, landed {landed}, {dead} dead letters; "
                           f"produced {messages}")
    return {"fmt": fmt, "app": app, "rows": rows, "data_s": stop - start, "rows_s": rows / (stop - start),
            "steady_rows_s": steady, "wall_s": run["wall_s"], "batches": len(with_rows),
            "data_cpu_s": run["sampler"].between(start, stop),
            "worker_peak_rss_mib": run["sampler"].worker_peak_rss_kib / 1024, "workdir": workdir}


def summarize_runs(runs: list[dict], logs: dict[str, dict]) -> dict:
    """The flat figures of part 1 (module doc) per format and app, the ratios and the goals."""
    out: dict = {"max_bytes_per_trigger": MAX_BYTES_PER_TRIGGER, "mapped_file_size": MAPPED_FILE_SIZE,
                 "kept_columns": list(KEEP)}
    for fmt in FORMATS:
        out[f"{fmt}_messages"] = logs[fmt]["messages"]
        out[f"{fmt}_commitlog_bytes"] = logs[fmt]["bytes"]
        out[f"{fmt}_body_bytes"] = logs[fmt]["body_bytes"]
        for app, label in (("bronze", "bronze"), ("tables", "typed")):
            mine = [r for r in runs if r["fmt"] == fmt and r["app"] == app]
            key = f"{fmt}_{label}"
            out[f"{key}_rows_s"] = round(statistics.median(r["rows_s"] for r in mine), 1)
            out[f"{key}_steady_rows_s"] = round(statistics.median(r["steady_rows_s"] for r in mine), 1)
            out[f"{key}_data_s"] = round(statistics.median(r["data_s"] for r in mine), 3)
            out[f"{key}_cold_s"] = round(statistics.median(r["wall_s"] for r in mine), 2)
            out[f"{key}_batches"] = mine[0]["batches"]
            out[f"{key}_worker_peak_rss_mib"] = round(max(r["worker_peak_rss_mib"] for r in mine), 1)
            kinds = {k: statistics.median(r["data_cpu_s"].get(k, 0.0) for r in mine) for k in (*PROC_KINDS, "outside")}
            out[f"{key}_data_cpu_s_by_kind"] = {k: round(v, 2) for k, v in kinds.items()}
            gb = logs[fmt]["bytes"] / 1e9
            out[f"{key}_cpu_s_per_gb"] = round(sum(v for k, v in kinds.items() if k != "outside") / gb, 2)
            out[f"{key}_py_worker_cpu_s_per_gb"] = round(kinds["py-worker"] / gb, 2)
            out[f"{key}_spark_jvm_cpu_s_per_gb"] = round(kinds["spark-jvm"] / gb, 2)
            out[f"{key}_rows_s_each"] = [round(r["rows_s"], 1) for r in mine]
        pairs = zip([r for r in runs if r["fmt"] == fmt and r["app"] == "bronze"],
                    [r for r in runs if r["fmt"] == fmt and r["app"] == "tables"], strict=True)
        out[f"{fmt}_typed_vs_bronze"] = round(statistics.median(t["rows_s"] / b["rows_s"] for b, t in pairs), 3)
        out[f"{fmt}_goal_ratio_met"] = out[f"{fmt}_typed_vs_bronze"] >= GOAL_RATIO
        out[f"{fmt}_goal_rows_s_met"] = out[f"{fmt}_typed_steady_rows_s"] >= GOAL_ROWS_S
        out[f"{fmt}_goal_worker_rss_met"] = out[f"{fmt}_typed_worker_peak_rss_mib"] <= GOAL_WORKER_RSS_MIB
    out["goals"] = {"typed_vs_bronze": GOAL_RATIO, "typed_steady_rows_s": GOAL_ROWS_S,
                    "worker_peak_rss_mib": GOAL_WORKER_RSS_MIB}
    return out


# --- part 2: where to decode ---------------------------------------------------------------------------------
def task_decode_function(decoder, keep: tuple[str, ...]):
    """The ``mapInArrow`` function of the ``task_decoder`` variant: each batch's ``body`` decoded by ``decoder`` (a
    typed tables' BodyDecoder, shipped pickled), the ``keep`` columns beside. Defined in a function so cloudpickle
    ships it by value (``bench`` is not installed)."""
    import pyarrow as pa

    def decode(batches):
        for batch in batches:
            fields = decoder.decode(batch.column("body")).fields
            columns = [*fields.columns, *(batch.column(k) for k in keep)]
            yield pa.RecordBatch.from_arrays(columns, names=[*fields.schema.names, *keep])

    return decode


def spark_variants(spark, bronze_table: Path, folder: Path, out: Path) -> dict:
    """``{variant: () -> None}``: each writes the typed rows of ``bronze_table`` (its Parquet files) as Parquet into
    ``out/VARIANT`` with Spark's writer (part 2 of the module doc)."""
    from pyspark.sql.avro.functions import from_avro
    from pyspark.sql.functions import col
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType

    from streaming_apps.tables.decode.base import decoder_for

    source = spark.read.parquet(str(bronze_table))
    decoder = decoder_for("avro", {"schema": "payment.avsc"}, folder)
    schema = StructType([*from_arrow_schema(decoder.schema).fields, *(source.schema[k] for k in KEEP)])
    avsc = (folder / "payment.avsc").read_text(encoding="utf-8")
    frames = {
        "copy": source.select("body", *KEEP),
        "from_avro": source.select(from_avro(col("body"), avsc).alias("v"), *KEEP).select("v.*", *KEEP),
        "task_decoder": source.select("body", *KEEP).mapInArrow(task_decode_function(decoder, KEEP), schema),
    }
    return {name: (lambda df=df, name=name: df.write.mode("overwrite").parquet(str(out / name)))
            for name, df in frames.items()}


def where_to_decode(bronze_table: Path, folder: Path, root: Path, rounds: int, rows: int) -> dict:
    """Part 2 (module doc): per variant, median rows/s and CPU seconds per GB of CommitLog over ``rounds`` interleaved
    rounds after a warm-up round; ``rows`` the table's rows."""
    from bench.delta import process_tree_cpu_seconds
    from streaming_apps.spark_session import build_spark_session

    jars = sorted(glob.glob(str(SPARK_AVRO_JARS / "spark-avro_*.jar")))
    if not jars:
        raise RuntimeError(f"no spark-avro jar in {SPARK_AVRO_JARS}: run `make jvm-peers`")
    spark = build_spark_session("bench-tables", local_dir=str(root / "spark-local"), jars=jars,
                                log_file=root / "spark.log")
    try:
        variants = spark_variants(spark, bronze_table, folder, root / "spark-out")
        measured: dict[str, list[tuple[float, float]]] = {v: [] for v in SPARK_VARIANTS}
        for i in range(rounds + 1):
            for name in SPARK_VARIANTS:
                os.sync()
                cpu0, t0 = process_tree_cpu_seconds(), time.perf_counter()
                variants[name]()
                seconds, cpu = time.perf_counter() - t0, process_tree_cpu_seconds() - cpu0
                if i:  # round 0 warms the JVM, the workers and the imports up
                    measured[name].append((seconds, cpu))
                print(f"spark round {i} {name}: {seconds:.2f} s, cpu {cpu:.2f} s", flush=True)
        check = spark.read.parquet(str(root / "spark-out" / "from_avro"))
        same = check.count() == rows and spark.read.parquet(str(root / "spark-out" / "task_decoder")).count() == rows
    finally:
        spark.stop()
    out = {}
    for name, values in measured.items():
        out[f"{name}_rows_s"] = round(statistics.median(rows / s for s, _ in values), 1)
        out[f"{name}_cpu_s"] = round(statistics.median(c for _, c in values), 2)
        out[f"{name}_s_each"] = [round(s, 2) for s, _ in values]
    out["rows_equal"] = same
    out["from_avro_vs_task_decoder"] = round(out["from_avro_rows_s"] / out["task_decoder_rows_s"], 3)
    return out


# --- main ----------------------------------------------------------------------------------------------------
def run(*, mib: int, rounds: int, root: Path) -> dict:
    """Parts 1 and 2 with ``mib`` MiB of CommitLog per format and ``rounds`` rounds; the results' figures."""
    from bench.delta import produce_backlog_bytes
    from broker_stub.launcher import BrokerProcess

    folder = root / "schemas"
    folder.mkdir(parents=True)
    brokers, logs, decls = {}, {}, {}
    try:
        for fmt in FORMATS:
            brokers[fmt] = BrokerProcess.start(root / f"broker-{fmt}", brokerName="broker-a",
                                               mappedFileSizeCommitLog=MAPPED_FILE_SIZE)
            body, body_bytes = body_maker(fmt, folder)
            t = time.perf_counter()
            messages = produce_backlog_bytes(brokers[fmt], mib * MIB, topic=TOPIC, body=body)
            end = _max_offset(brokers[fmt])
            logs[fmt] = {"messages": messages, "bytes": end, "body_bytes": body_bytes}
            decls[fmt] = declaration(folder, fmt)
            print(f"{fmt}: {messages} messages, {end / MIB:.0f} MiB in {time.perf_counter() - t:.0f} s", flush=True)
        runs = []
        for i in range(rounds):
            for fmt in FORMATS:
                for app in ("bronze", "tables"):
                    r = app_run(brokers[fmt], root, fmt, app, i, decls[fmt], logs[fmt]["messages"])
                    print(f"round {i} {fmt} {app}: {r['rows_s']:,.0f} rows/s (steady {r['steady_rows_s']:,.0f}), "
                          f"data {r['data_s']:.2f} s, worker peak {r['worker_peak_rss_mib']:.0f} MiB, cpu "
                          f"{json.dumps({k: round(v, 1) for k, v in r['data_cpu_s'].items() if v})}", flush=True)
                    if not (i == 0 and app == "bronze" and fmt == "avro"):
                        shutil.rmtree(r["workdir"], ignore_errors=True)
                    runs.append(r)
    finally:
        for broker in brokers.values():
            broker.stop()
    results = summarize_runs(runs, logs)
    spark = where_to_decode(root / "avro-bronze-0" / "tables" / "bronze", folder, root, rounds,
                            logs["avro"]["messages"])
    results["where_to_decode"] = spark
    for name in SPARK_VARIANTS:
        results[f"avro_spark_{name}_rows_s"] = spark[f"{name}_rows_s"]
        results[f"avro_spark_{name}_cpu_s_per_gb"] = round(spark[f"{name}_cpu_s"] / (logs["avro"]["bytes"] / 1e9), 2)
    results["avro_spark_from_avro_vs_task_decoder"] = spark["from_avro_vs_task_decoder"]
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tables", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--mib", type=int, default=None, help="CommitLog per format, MiB (default 1024; quick 128)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3; quick 1)")
    parser.add_argument("--results-name", default=None, help="bench/results/NAME.json (tables; quick tables_quick)")
    args = parser.parse_args(argv)
    mib = args.mib or (128 if args.quick else 1024)
    rounds = args.rounds or (1 if args.quick else 3)
    root = Path(tempfile.mkdtemp(prefix="bench-tables-"))
    try:
        results = {"quick": args.quick, "rounds": rounds, "mib": mib, **run(mib=mib, rounds=rounds, root=root)}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = []
    for fmt in FORMATS:
        rows += [
            (f"{fmt}_bronze_rows_s", results[f"{fmt}_bronze_rows_s"], f"data phase, median of {rounds} cold runs"),
            (f"{fmt}_typed_rows_s", results[f"{fmt}_typed_rows_s"], "run tables, same log"),
            (f"{fmt}_typed_steady_rows_s", results[f"{fmt}_typed_steady_rows_s"],
             f"after the first micro-batch; goal >= {GOAL_ROWS_S:,}"),
            (f"{fmt}_typed_vs_bronze", results[f"{fmt}_typed_vs_bronze"], f"goal >= {GOAL_RATIO}"),
            (f"{fmt}_typed_worker_peak_rss_mib", results[f"{fmt}_typed_worker_peak_rss_mib"],
             f"goal <= {GOAL_WORKER_RSS_MIB}"),
            (f"{fmt}_typed_py_worker_cpu_s_per_gb", results[f"{fmt}_typed_py_worker_cpu_s_per_gb"], "data phase"),
        ]
    for name in SPARK_VARIANTS:
        rows.append((f"avro_spark_{name}_rows_s", results[f"avro_spark_{name}_rows_s"], "Spark, bronze's Parquet"))
    rows.append(("avro_spark_from_avro_vs_task_decoder", results["avro_spark_from_avro_vs_task_decoder"], ""))
    name = args.results_name or ("tables_quick" if args.quick else "tables")
    report(name, results, rows, notes="quick mode: small sizes, not comparable" if args.quick else "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
