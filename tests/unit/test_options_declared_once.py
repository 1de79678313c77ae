"""Every option of ``format("hareplica")`` is written once in ``connector/``: in its declaration,
``connector/options/declaration.py`` (issues 41, 54).

Error messages take an option's name from the declaration (``OPTIONS.fail_on_data_loss.name``) and docstrings
name the settings attribute, so a module of ``connector/`` that spells an option's name (as users write it, or
lower-cased as Spark hands it over) is a second declaration of it. The scan covers every option whose name is
camelCase; ``brokers``, ``slaves``, ``subscribe`` and ``mode`` are English words the code uses in other senses
too. The allow-list holds the RocketMQ names that happen to be spelled like an option.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from connector.options.declaration import OPTIONS

ROOT = Path(__file__).resolve().parents[2]
DECLARATION = "connector/options/declaration.py"
#: module -> option names it may write, and why
ALLOWED = {
    # RocketMQ 4.9.8's plain-ACL header fields and account keys, which the options mirror
    "connector/protocol/acl.py": {"accessKey", "secretKey"},
    # RocketMQ's MessageStoreConfig key whose default the option takes (HA_SEND_HEARTBEAT_INTERVAL_MS)
    "connector/protocol/ha.py": {"haSendHeartbeatInterval"},
    # RocketMQ's broker.conf key naming the name servers (a slave learns its master through them)
    "connector/protocol/address.py": {"namesrvAddr"},
}
CAMEL_CASE = sorted(name for name in OPTIONS if name != name.lower())


def spellings(text: str, names: list[str]) -> dict[str, int]:
    """How often ``text`` writes each of ``names`` as a whole word, as given or lower-cased (case-sensitive,
    like ``git grep -w``)."""
    out = {}
    for name in names:
        count = len(re.findall(rf"(?<![\w$]){re.escape(name)}(?!\w)", text))
        count += len(re.findall(rf"(?<![\w$]){re.escape(name.lower())}(?!\w)", text))
        if count:
            out[name] = count
    return out


def test_the_scan_finds_an_option_written_outside_the_declaration():
    text = 'raise HAReplicaOptionError("maxOutageMs", v, "...")\nopts.get("readtimeoutms")\n# max_outage_ms\n'
    assert spellings(text, CAMEL_CASE) == {"maxOutageMs": 1, "readTimeoutMs": 1}
    assert spellings("self.max_outage_ms; maxOutageMsX; OPTIONS.max_outage_ms.name", CAMEL_CASE) == {}


def test_the_camel_case_options_are_those_users_know():
    assert {"readFrom", "minInSyncSlaves", "startingOffsets", "maxBytesPerTrigger", "failOnDataLoss",
            "subscribePattern", "maxOutageMs", "haSendHeartbeatInterval", "batchTransform", "accessKey",
            "secretKey"} <= set(CAMEL_CASE)


def test_no_module_of_connector_but_the_declaration_writes_an_option_name():
    found = []
    for path in sorted((ROOT / "connector").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == DECLARATION:
            continue
        hits = spellings(path.read_text(encoding="utf-8"), CAMEL_CASE)
        extra = sorted(set(hits) - ALLOWED.get(rel, set()))
        found += [f"{rel}: {name} ({hits[name]}x)" for name in extra]
    assert found == [], "option names written outside connector/options/declaration.py:\n" + "\n".join(found)


def test_the_allow_list_is_still_needed():
    """An allow-list entry the code no longer needs is removed, so the list stays the short, explained one."""
    unused = [f"{rel}: {name}" for rel, names in ALLOWED.items()
              for name in sorted(names - set(spellings((ROOT / rel).read_text(encoding="utf-8"), sorted(names))))]
    assert unused == []


def test_the_declaration_writes_every_option_once():
    text = (ROOT / DECLARATION).read_text(encoding="utf-8")
    declared = {name: len(re.findall(rf'Option\("{re.escape(name)}"', text)) for name in OPTIONS}
    assert set(declared.values()) == {1}, declared


def test_reading_the_options_pulls_in_no_socket_client_decoder_or_arrow():
    """The parser, the declaration and the settings import neither the HA client nor the decoder nor pyarrow, so
    the driver's planning rules can read them cheaply (a fresh interpreter: this one has loaded everything)."""
    code = ("import sys, connector.options.parse, connector.options.declaration, connector.options.settings; "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'pyspark', 'socket') "
            "or m.startswith(('connector.client', 'connector.decode', 'connector.source')))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == []
