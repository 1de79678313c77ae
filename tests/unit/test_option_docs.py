"""The option table of docs/options.md (section ``format("hareplica")``) names every option of
``format("hareplica")`` once, with the default and the bounds the declaration ``connector.options.declaration.OPTIONS``
gives (issues 23, 41): the code is the one definition, the table is checked against it. docs/source.md
"Options" points to that table.

A table row's option cell holds the name in backticks, or two names joined by ``/``; the default cell holds
``(required)``, ``(none)`` / ``(all)`` (unset) or the value in backticks; the values cell states the bounds
(``≥ N``, ``N .. M``), the choices in backticks or ``true`` / ``false``; the meaning cell is not empty.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import connector.options.parse as options_module
from connector.options.declaration import OPTION_DEFAULTS, OPTIONS, REQUIRED
from connector.options.settings import DecodeSettings, FetchSettings

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


def _option_rows(section: str) -> list[tuple[str, str, str, str]]:
    """``(option, default, values, meaning)`` cells of every row of the first table whose header starts
    ``| option | default |``."""
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
            rows.append((cells[0], cells[1], cells[2], cells[3]))
    assert rows, "no option table found"
    return rows


def _names(cell: str) -> list[str]:
    """The option names of an option cell."""
    return re.findall(r"`([^`]+)`", cell)


def _documented(default: object) -> str:
    """How a table writes the default ``default`` of the code."""
    if isinstance(default, bool):
        return "true" if default else "false"
    return str(default)


def _check_table(path: str, heading: str) -> dict[str, str]:
    rows = _option_rows(_section((ROOT / path).read_text(encoding="utf-8"), heading))
    problems, seen = [], {}
    for option_cell, default_cell, values_cell, meaning_cell in rows:
        names = _names(option_cell)
        assert names, f"{path}: row {option_cell!r} names no option"
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
            problems += [f"{path}: option {name}: {p}" for p in _values_problems(OPTIONS[name], values_cell)]
            if not meaning_cell.strip():
                problems.append(f"{path}: option {name} has no meaning")
    missing = sorted(set(OPTION_DEFAULTS) - set(seen))
    if missing:
        problems.append(f"{path}: no row for option(s) {', '.join(missing)}")
    assert not problems, "\n".join(problems)
    return seen


def _values_problems(option, cell: str) -> list[str]:
    """What the values cell ``cell`` of ``option``'s row misses of the declaration: an integer's bounds (``≥ N``
    or ``N .. M``; a bound stated against another option, ``≥ `name```, stands for the minimum), a choice
    option's choices, a boolean's ``true`` / ``false``."""
    if option.kind == "int":
        stated = (f"≥ {option.minimum}" in cell or f"{option.minimum} .. {option.maximum}" in cell
                  or re.search(r"≥ `\w+`", cell) is not None)
        if option.maximum is not None:
            stated = stated and str(option.maximum) in cell
        return [] if stated else [f"values {cell!r} do not state the bounds {option.minimum} .. {option.maximum}"]
    if option.kind == "bool":
        return [] if "`true` / `false`" in cell else [f"values {cell!r} do not say `true` / `false`"]
    if option.kind == "choice":
        return [f"values {cell!r} do not name the choice {c}" for c in option.choices if f"`{c}`" not in cell]
    return []


def test_the_values_check_finds_a_wrong_bound():
    assert _values_problems(OPTIONS.fetch_retries, "integer ≥ 0") == []
    assert _values_problems(OPTIONS.fetch_retries, "integer ≥ 1") != []
    assert _values_problems(OPTIONS.max_inflated_body_bytes, "integer 1 .. 1073741824") == []
    assert _values_problems(OPTIONS.max_inflated_body_bytes, "integer ≥ 1") != []
    assert _values_problems(OPTIONS.read_from, "`master` or `slave`") == []
    assert _values_problems(OPTIONS.read_from, "`master`") != []


def test_every_option_is_declared_with_a_one_line_meaning():
    """The declaration is complete: a meaning on one line for each option, bounds only on integers, choices only
    on choice options, and the attribute it names is a field of what its holder is."""
    fields = {"fetch": set(FetchSettings.__dataclass_fields__), "decode": set(DecodeSettings.__dataclass_fields__),
              "source": set(options_module.SourceOptions.__dataclass_fields__), "acl": {"access_key", "secret_key"}}
    for option in OPTIONS.values():
        assert option.meaning.strip() and "\n" not in option.meaning, option.name
        assert option.kind in ("int", "bool", "choice", "str"), option.name
        assert (option.minimum is None and option.maximum is None) or option.kind == "int", option.name
        assert bool(option.choices) == (option.kind == "choice"), option.name
        assert option.attr in fields[option.holder], option.name


def test_the_settings_are_built_from_the_declaration():
    """Issue 54: FetchSettings and DecodeSettings hold a field per option of their holder, in declaration order and
    with its default, and only the few fields no single option fills; so a new option of either is one record."""
    for cls, holder, extra in ((FetchSettings, "fetch", ["credentials"]), (DecodeSettings, "decode", ["topic_tags"])):
        declared = OPTIONS.held_by(holder)
        assert declared, holder
        assert list(cls.__dataclass_fields__) == [o.attr for o in declared] + extra
        built = cls()
        assert {o.attr: getattr(built, o.attr) for o in declared} == {o.attr: o.default for o in declared}


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


def test_every_option_the_parser_knows_is_declared():
    """The declaration is the list of options: the parser knows exactly those."""
    assert set(options_module._KNOWN) == {name.lower() for name in OPTIONS}


#: options whose parsed value is not an attribute named by their ``attr``: the ACL pair becomes one
#: ``FetchSettings.credentials``
_PARSED_AS = {"access_key": "credentials", "secret_key": "credentials"}


def _parsed(opts, option):
    """The value ``option`` got in the parsed ``opts`` (a SourceOptions), found through its holder; an empty
    tuple or set (what ``slaves``, ``namesrvAddr`` and ``dropBrokerSets`` hold when not given) as None."""
    held = {"fetch": opts.fetch, "decode": opts.decode, "acl": opts.fetch, "source": opts}[option.holder]
    value = getattr(held, _PARSED_AS.get(option.attr, option.attr))
    return None if value in ((), frozenset()) else value


def test_parsed_defaults_are_the_table():
    """Options left out come back as the declaration says (the parser reads no default of its own); every option
    is found through its holder, so the check covers an option added to the declaration."""
    opts = options_module.SourceOptions.from_options({"brokers": "broker-a=127.0.0.1:10912"})
    parsed = {option.name: _parsed(opts, option) for option in OPTIONS.values() if option.name != "brokers"}
    expected = {name: default for name, default in OPTION_DEFAULTS.items() if name != "brokers"}
    assert parsed == expected
    # the same defaults when FetchSettings / DecodeSettings / SourceOptions are built in code
    assert (FetchSettings(), DecodeSettings()) == (opts.fetch, opts.decode)
    assert options_module.SourceOptions(brokers=opts.brokers) == opts


def test_options_docstring_does_not_restate_defaults():
    """The module's docstring points to docs/source.md instead of a table of its own."""
    doc = options_module.__doc__ or ""
    assert "docs/source.md" in doc
    assert "=====" not in doc, "connector/options/parse.py's docstring holds an option table again"
    for name, default in OPTION_DEFAULTS.items():
        if default not in (None, REQUIRED) and not isinstance(default, bool):
            assert not re.search(rf"\b{re.escape(name)}\b\s+{re.escape(_documented(default))}\b", doc), name


def test_contributing_shows_how_to_add_an_option_with_a_declared_one():
    """Issue 54: CONTRIBUTING.md "Adding an option" lists the places a new option takes and shows a record of the
    declaration as it stands (compared word for word), so the example cannot drift from the code."""
    section = _section((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"), "## Adding an option")
    records = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert records, "no record shown"
    declaration = " ".join((ROOT / "connector/options/declaration.py").read_text(encoding="utf-8").split())
    for record in records:
        (name,) = re.findall(r'Option\("(\w+)"', record)
        assert name in OPTIONS
        assert " ".join(record.split()) in declaration, f"the record of {name} differs from the declaration"
    for place in ("connector/options/declaration.py", "docs/options.md", "CHANGELOG.md"):
        assert place in section, place


def test_the_landing_options_are_declared_and_become_the_sink_options_they_name():
    """Issue 54: ``format("hareplica-landing")``'s own options are records of the declaration too (holder
    ``landing``), none of them a source option; the landing hands each to the Delta sink under the option its
    record names, the source options and ``storage.KEY`` where they were."""
    from connector.landing.options import split_landing_options
    from connector.options.declaration import LANDING_OPTIONS

    assert {o.holder for o in LANDING_OPTIONS.values()} == {"landing"}
    assert not {n.lower() for n in LANDING_OPTIONS} & {n.lower() for n in OPTIONS}
    given = {o.name: f"value-{i}" for i, o in enumerate(LANDING_OPTIONS.values())}
    source, sink = split_landing_options({**given, "brokers": "broker-a=h:2", "storage.AWS_REGION": "eu"})
    assert source == {"brokers": "broker-a=h:2"}
    assert sink == {**{o.sink_option: given[o.name] for o in LANDING_OPTIONS.values()}, "storage.AWS_REGION": "eu"}
    assert [o.sink_option for o in LANDING_OPTIONS.values()] == [
        "path", "appId", "partitionBy", "targetFileSize", "compression", "targets", "split", "splitConfig"]


def test_the_sink_options_are_declared_documented_and_parsed_as_declared(tmp_path):
    """Issue 54: ``format("deltalake")``'s options are records of the declaration (holder ``sink``): docs/options.md
    names each, the sink parses each under its declared name with its declared default, and its codecs are the
    declared choices."""
    from connector.delta.options import COMPRESSION_CODECS, DeltaSinkOptions
    from connector.landing.options import _TARGET_KEYS
    from connector.options.declaration import REQUIRED, SINK_OPTIONS

    section = _section((ROOT / "docs/options.md").read_text(encoding="utf-8"), '## `format("deltalake")`')
    assert set(SINK_OPTIONS) <= set(re.findall(r"`(\w+)`", section))
    assert set(COMPRESSION_CODECS) == set(SINK_OPTIONS.compression.choices)
    assert set(_TARGET_KEYS) <= set(SINK_OPTIONS)
    required = {o.name: str(tmp_path / "t") if o.attr == "table_uri" else "app"
                for o in SINK_OPTIONS.values() if o.default is REQUIRED}
    parsed = DeltaSinkOptions.from_options({k.upper(): v for k, v in required.items()})  # names case-insensitive
    assert (parsed.target_file_size, parsed.compression, parsed.create_in_non_empty_path, parsed.partition_by) == (
        SINK_OPTIONS.target_file_size.default, SINK_OPTIONS.compression.default,
        SINK_OPTIONS.create_in_non_empty_path.default, SINK_OPTIONS.partition_by.default)
