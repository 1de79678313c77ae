"""The figures of docs/performance.md and of README.md "Benchmarks" are those of the committed
``bench/results/*.json``: a page states the latest results, not figures of other runs.

In docs/performance.md, a section whose heading names ``bench/NAME.py`` has tables whose rows start with a
metric in backticks (a key of ``bench/results/NAME.json``'s ``results``): the row's first number is that value
as rounded on the page, and a number in brackets after it is the key's ``_spread``. The catch-up section's
Parquet table is its ``parquet_variants``; the profile's table rows naming process kinds in backticks are the
sums of those kinds' CPU in ``bronze_profile.json``. README.md's benchmark rows name their JSON file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "performance.md"
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _results(name: str) -> dict:
    return json.loads((ROOT / "bench" / "results" / f"{name}.json").read_text(encoding="utf-8"))["results"]


def _close(text: str, value: float) -> bool:
    """Whether the number ``text`` as written (its decimals) is ``value`` rounded."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(float(text.replace(",", "")) - value) <= 0.5 * 10 ** -decimals + 1e-9


def _sections() -> dict[str, str]:
    parts = re.split(r"^## (.+)$", DOC.read_text(encoding="utf-8"), flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def _rows(section: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("|")[1:-1]] for line in section.splitlines()
            if line.startswith("|") and not set(line) <= set("|-: ")]


def _bench_sections() -> list[tuple[str, str]]:
    out = []
    for heading, body in _sections().items():
        m = re.search(r"`bench/(\w+)\.py`", heading)
        if m:
            out.append((m.group(1), body))
    return out


@pytest.mark.parametrize(("name", "body"), _bench_sections(), ids=[n for n, _ in _bench_sections()])
def test_metric_rows_are_the_json(name, body):
    results = _results(name)
    checked, problems = 0, []
    for cells in _rows(body):
        key = re.fullmatch(r"`(\w+)`", cells[0])
        if not key or key.group(1) not in results:
            continue
        key = key.group(1)
        numbers = _NUMBER.findall(cells[1])
        if not _close(numbers[0], results[key]):
            problems.append(f"{key}: the page says {numbers[0]}, {name}.json {results[key]}")
        spread = re.search(r"\((" + _NUMBER.pattern + r")\)", cells[1])
        if spread and not _close(spread.group(1), results[f"{key}_spread"]):
            problems.append(f"{key}: spread {spread.group(1)}, {name}.json {results[f'{key}_spread']}")
        checked += 1
    assert not problems, "\n".join(problems)
    if name != "bronze_profile":
        assert checked >= 10, f"only {checked} rows of {name}.json found"


def test_parquet_variants_are_the_json():
    body = dict(_bench_sections())["catchup"]
    variants = {v["settings"]: v for v in _results("catchup")["parquet_variants"]}
    rows = [c for c in _rows(body) if c[0] in variants]
    assert len(rows) == len(variants)
    for settings, cpu, size in rows:
        assert _close(cpu, variants[settings]["cpu_s_per_gb"]), settings
        assert int(size.replace(",", "")) == variants[settings]["bytes"], settings


def test_profile_rows_are_the_json():
    body = dict(_bench_sections())["bronze_profile"]
    results = _results("bronze_profile")
    columns = (results["small"]["cpu_s_by_kind"], results["large"]["cpu_s_by_kind"],
               results["marginal_cpu_s_per_gb"])
    checked = 0
    for cells in _rows(body):
        kinds = re.findall(r"`([\w-]+)`", cells[0])
        if not kinds or not all(k in columns[0] for k in kinds):
            continue
        for cell, column in zip(cells[1:4], columns, strict=True):
            assert _close(_NUMBER.findall(cell)[0], sum(column[k] for k in kinds)), (cells[0], cell)
        checked += 1
    assert checked == 4


def test_readme_benchmark_rows_are_the_json():
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Benchmarks\n", 1)[1].split("\n## ", 1)[0]
    rows = [c for c in _rows(text) if c and re.fullmatch(r"`\w+\.json`", c[3] if len(c) > 3 else "")]
    assert len(rows) == 5
    for ratio, value, _goal, json_name, _command in rows:
        key = re.search(r"\(`(\w+)`\)", ratio).group(1)
        assert _close(value, _results(json_name.strip("`").removesuffix(".json"))[key]), key
