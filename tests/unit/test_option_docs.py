"""The option table of docs/options.md (section ``format("hareplica")``) names every option of
``format("hareplica")`` once, with the default ``connector.options.OPTION_DEFAULTS`` defines (issue 23): the
code is the one definition, the table is checked against it. docs/source.md "Options" points to that table.

A table row's option cell holds the name in backticks, maybe ``(alias `old`)`` or two names joined by ``/``;
the default cell holds ``(required)``, ``(none)`` / ``(all)`` (unset) or the value in backticks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import connector.options as options_module
from connector.options import OPTION_ALIASES, OPTION_DEFAULTS, REQUIRED

ROOT = Path(__file__).resolve().parents[2]
_UNSET_CELLS = {"(none)": None, "(all)": None}


def _section(text: str, heading: str) -> str:
    """The lines of the section under ``heading`` (a markdown heading line), up to the next heading of its level."""
    lines = text.splitlines()
    start = lines.index(heading)
    level = heading.split(" ")[0]
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("#") and lines[i].split(" ")[0] in {level, level[:-1]} | {"#"}), len(lines))
    return "\n".join(lines[start + 1:end])


def _option_rows(section: str) -> list[tuple[str, str]]:
    """``(option cell, default cell)`` of every row of the first table whose header starts ``| option | default |``."""
    rows, inside = [], False
    for line in section.splitlines():
        if re.match(r"^\|\s*option\s*\|\s*default\s*\|", line):
            inside = True
            continue
        if inside:
            if not line.startswith("|"):
                break
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            if set(cells[0]) <= set("-: "):
                continue
            rows.append((cells[0], cells[1]))
    assert rows, "no option table found"
    return rows


def _names(cell: str) -> tuple[list[str], list[str]]:
    """The option names of an option cell and the aliases it gives (``(alias `x`)``)."""
    aliases = re.findall(r"\(alias `([^`]+)`\)", cell)
    names = re.findall(r"`([^`]+)`", re.sub(r"\(alias `[^`]+`\)", "", cell))
    return names, aliases


def _documented(default: object) -> str:
    """How a table writes the default ``default`` of the code."""
    if isinstance(default, bool):
        return "true" if default else "false"
    return str(default)


def _check_table(path: str, heading: str) -> dict[str, str]:
    rows = _option_rows(_section((ROOT / path).read_text(encoding="utf-8"), heading))
    problems, seen = [], {}
    for option_cell, default_cell in rows:
        names, aliases = _names(option_cell)
        assert names, f"{path}: row {option_cell!r} names no option"
        for alias in aliases:
            if OPTION_ALIASES.get(alias) not in names:
                problems.append(f"{path}: {alias} is documented as an alias of {names}, the code says "
                                f"{OPTION_ALIASES.get(alias)}")
        for name in names:
            if name in seen:
                problems.append(f"{path}: option {name} has two rows")
            seen[name] = default_cell
            if name not in OPTION_DEFAULTS:
                problems.append(f"{path}: option {name} is not an option of the code")
                continue
            code = OPTION_DEFAULTS[name]
            if default_cell == "(required)":
                ok = code is REQUIRED
            elif default_cell in _UNSET_CELLS:
                ok = code is None
            else:
                value = re.fullmatch(r"`([^`]*)`", default_cell)
                ok = value is not None and code is not None and code is not REQUIRED \
                    and value.group(1) == _documented(code)
            if not ok:
                problems.append(f"{path}: option {name} has default {default_cell!r}, the code's is {code!r}")
    missing = sorted(set(OPTION_DEFAULTS) - set(seen))
    if missing:
        problems.append(f"{path}: no row for option(s) {', '.join(missing)}")
    assert not problems, "\n".join(problems)
    return seen


@pytest.mark.parametrize(("path", "heading"), [
    ("docs/options.md", '## `format("hareplica")`'),
])
def test_option_table_matches_the_code(path, heading):
    _check_table(path, heading)


def test_source_doc_points_to_the_option_table():
    """docs/source.md "Options" (which docstrings cite) sends the reader to the one table."""
    section = _section((ROOT / "docs/source.md").read_text(encoding="utf-8"), "## Options")
    assert "(options.md)" in section
    assert "| option | default |" not in section, "docs/source.md holds a second option table"


def test_every_option_the_parser_knows_has_a_default_entry():
    """OPTION_DEFAULTS is the list of options: the parser knows exactly those and their aliases."""
    known = {name.lower() for name in OPTION_DEFAULTS} | {alias.lower() for alias in OPTION_ALIASES}
    assert set(options_module._KNOWN) == known


def test_parsed_defaults_are_the_table():
    """Options left out come back as OPTION_DEFAULTS says (the parser reads no default of its own)."""
    opts = options_module.SourceOptions.from_options({"brokers": "broker-a=127.0.0.1:10912"})
    fetch = opts.fetch
    parsed = {
        "slaves": opts.slaves or None, "readFrom": opts.read_from, "minInSyncSlaves": opts.min_in_sync_slaves,
        "startingOffsets": opts.starting_offsets, "maxBytesPerTrigger": opts.max_bytes_per_trigger,
        "minPartitions": opts.min_partitions, "maxBytesPerPartition": opts.max_bytes_per_partition,
        "failOnDataLoss": fetch.fail_on_data_loss, "subscribe": fetch.topic_filter.topics,
        "subscribePattern": fetch.topic_filter.pattern,
        "includeSystemTopics": fetch.topic_filter.include_system_topics, "decompressBody": fetch.decompress_body,
        "mode": fetch.mode, "verifyBodyCRC": fetch.verify_body_crc,
        "maxInflatedBodyBytes": fetch.max_inflated_body_bytes, "connectTimeoutMs": fetch.connect_timeout_ms,
        "readTimeoutMs": fetch.read_timeout_ms, "fetchRetries": fetch.fetch_retries,
        "reconnectBackoffMs": fetch.reconnect_backoff_ms, "reconnectBackoffMaxMs": fetch.reconnect_backoff_max_ms,
        "maxOutageMs": fetch.max_outage_ms, "haSendHeartbeatInterval": fetch.heartbeat_interval_ms,
        "arrowMaxRecordsPerBatch": fetch.max_records_per_batch, "arrowMaxBytesPerBatch": fetch.max_bytes_per_batch,
        "fetchPrefetchChunks": fetch.prefetch_chunks, "batchTransform": opts.batch_transform,
        "accessKey": fetch.credentials, "secretKey": fetch.credentials,
    }
    expected = {name: default for name, default in OPTION_DEFAULTS.items() if name != "brokers"}
    assert parsed == expected
    # the same defaults when FetchSettings / SourceOptions are built in code
    assert options_module.FetchSettings() == fetch
    assert options_module.SourceOptions(brokers=opts.brokers) == opts


def test_options_docstring_does_not_restate_defaults():
    """The module's docstring points to docs/source.md instead of a table of its own."""
    doc = options_module.__doc__ or ""
    assert "docs/source.md" in doc
    assert "=====" not in doc, "connector/options.py's docstring holds an option table again"
    for name, default in OPTION_DEFAULTS.items():
        if default not in (None, REQUIRED) and not isinstance(default, bool):
            assert not re.search(rf"\b{re.escape(name)}\b\s+{re.escape(_documented(default))}\b", doc), name
