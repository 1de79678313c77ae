"""Issue 52: the declaration file of ``hareplica run tables`` is checked before anything starts; every problem is one
line naming the file, the table and the key (docs/tables.md "The declaration")."""

from __future__ import annotations

import textwrap

import pytest

from streaming_apps.tables.declaration import FILE_KEYS, TABLE_KEYS, DeclarationError, load_declaration


def _write(tmp_path, text: str, name: str = "tables.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    (tmp_path / "schemas").mkdir(exist_ok=True)
    (tmp_path / "schemas" / "payment.avsc").write_text(
        '{"type": "record", "name": "Payment", "fields": [{"name": "id", "type": "string"}]}', encoding="utf-8")
    return path


GOOD = """
    [[table]]
    name = "payments"
    topics = ["PaymentEvents"]
    tags = "Created || Paid"
    format = "avro"
    schema = "schemas/payment.avsc"
    columns = ["keys", "tags", "storeTimestamp", "property:region"]
    partition_by = ["storeDate"]

    [[table]]
    name = "audit"
    topics = ["Audit", "PaymentEvents"]
    format = "string"
    mode = "upsert"
    key = ["keys"]
    on_error = "fail"
"""


def test_a_declaration_with_defaults(tmp_path):
    d = load_declaration(_write(tmp_path, GOOD))
    assert d.dead_letter_table == "dead_letters" and d.table_names == ("payments", "audit", "dead_letters")
    payments, audit = d.tables
    assert payments.tags == frozenset({"Created", "Paid"}) and audit.tags is None
    assert payments.settings["schema"] == str((tmp_path / "schemas" / "payment.avsc").resolve())
    assert payments.mode == "append" and payments.on_error == "dead-letter" and payments.key == ()
    assert audit.key == ("keys",) and audit.on_error == "fail"
    # the source reads only what the tables need; a topic read with every tag by one table reads every tag
    assert d.subscribe == "PaymentEvents,Audit"


def test_tags_of_two_tables_on_one_topic_are_merged(tmp_path):
    d = load_declaration(_write(tmp_path, """
        [[table]]
        name = "a"
        topics = ["T"]
        tags = "X"
        format = "bytes"
        [[table]]
        name = "b"
        topics = ["T"]
        tags = "Y || Z"
        format = "bytes"
    """))
    assert d.subscribe == "T:X || Y || Z"


@pytest.mark.parametrize(("text", "expected"), [
    ("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'yaml'\n", "table a: format: 'yaml' is not one of avro"),
    ("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'avro'\n", "table a: schema: a avro table needs it"),
    ("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'avro'\nschema = 'missing.avsc'\n",
     "table a: schema: no file"),
    ("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'protobuf'\nschema = 'schemas/payment.avsc'\n",
     "table a: message: a protobuf table needs it"),
    ("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'bytes'\ntags = \"SQL92:a > 1\"\n",
     "table a: tags: SQL92 expressions are not supported"),
    ("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'bytes'\ntags = \"a IS NOT NULL\"\n",
     "table a: tags:"),
    ("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'bytes'\n[[table]]\nname = 'a'\ntopics = ['U']\n"
     "format = 'bytes'\n", "table a: name is the name of another table"),
    ("dead_letter_table = 'a'\n[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'bytes'\n",
     "table a: name is the name of the dead_letter_table"),
    ("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'bytes'\nmode = 'upsert'\n",
     "table a: key: an upsert table needs its key"),
    ("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'bytes'\ncolumns = ['offset']\n",
     "table a: columns: 'offset' is not one of keys"),
    ("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'bytes'\nsorted = true\n", "table a: sorted: unknown key"),
    ("[[table]]\nname = 'a'\ntopics = []\nformat = 'bytes'\n", "table a: topics: must be a non-empty list"),
    ("[[table]]\nname = 'a'\ntopics = ['bad topic']\nformat = 'bytes'\n", "table a: topics: 'bad topic'"),
    ("[[table]]\nname = 'a b'\ntopics = ['T']\nformat = 'bytes'\n", "table #1: name 'a b' must be a table name"),
    ("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'bytes'\non_error = 'skip'\n",
     "table a: on_error: 'skip' is not one of dead-letter, fail"),
    ("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'string'\nschema = 'schemas/payment.avsc'\n",
     "table a: schema: a string table takes no schema"),
    ("name = 'a'\n", "unknown key name"),
    ("dead_letter_table = 'x'\n", "no [[table]] section"),
    ("[[table]\nname = 'a'\n", "not a TOML file"),
])
def test_bad_declarations_are_one_line_naming_file_table_and_key(tmp_path, text, expected):
    path = _write(tmp_path, text)
    with pytest.raises(DeclarationError) as info:
        load_declaration(path)
    line = str(info.value)
    assert line.startswith(str(path)) and expected in line and "\n" not in line, line


def test_a_missing_file(tmp_path):
    with pytest.raises(DeclarationError, match="cannot read the declaration"):
        load_declaration(tmp_path / "nope.toml")


def test_every_key_is_documented_in_the_reference():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "tables.md").read_text(encoding="utf-8")
    for key in (*FILE_KEYS, *TABLE_KEYS):
        assert f"| `{key}` |" in doc, key
