"""tests/support/java_tools.py: missing jars fail (never skip); programs compile once into their class folder."""

from __future__ import annotations

import pytest

from tests.support import java_tools


def test_missing_rocketmq_jars_fail_with_the_make_target(monkeypatch, tmp_path):
    monkeypatch.setattr(java_tools, "ROCKETMQ_LIB", tmp_path / "no-lib")
    with pytest.raises(java_tools.JavaToolError, match="run `make jvm-peers`"):
        java_tools.run_java("CommitLogDecoder", [str(tmp_path)], log_dir=tmp_path / "log")


def test_programs_compile_once(monkeypatch, tmp_path):
    classes = tmp_path / "classes" / "java-clients"
    monkeypatch.setattr(java_tools, "CLASSES", classes)
    assert java_tools.compiled_classes() == classes
    built = {p.name for p in classes.glob("*.class")}
    assert {"JavaProducer.class", "JavaConsumer.class", "CommitLogDecoder.class", "Json.class"} <= built
    stamp = (classes / ".built").stat().st_mtime_ns
    java_tools.compiled_classes()  # sources unchanged: no rebuild
    assert (classes / ".built").stat().st_mtime_ns == stamp


def test_decoder_error_names_offset_and_file(tmp_path):
    """A CommitLog file whose first record has a bad MAGICCODE: exit 2 and one line naming offset and file."""
    folder = tmp_path / "commitlog"
    folder.mkdir()
    (folder / "00000000000000001024").write_bytes(b"\x00\x00\x00\x40\x12\x34\x56\x78" + bytes(56))
    run = java_tools.run_java("CommitLogDecoder", [str(folder)], log_dir=tmp_path / "log", check=False)
    assert run.returncode == 2 and run.lines == []
    assert "CommitLog offset 1024 (file 00000000000000001024" in run.stderr
