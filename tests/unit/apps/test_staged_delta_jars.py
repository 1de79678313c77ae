"""Where `hareplica run --sink delta` and `query --engine spark` find Spark's Delta jars without --jars."""

from __future__ import annotations

from streaming_apps.apps.common import delta_jars_for
from streaming_apps.spark_session import STAGED_DELTA_JARS_DIR, staged_delta_jars


def _stage(root, *names):
    folder = root / STAGED_DELTA_JARS_DIR
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_bytes(b"PK")
    return folder


def test_the_first_root_holding_jars_wins_sorted_and_absolute(tmp_path):
    empty, staged, other = tmp_path / "empty", tmp_path / "staged", tmp_path / "other"
    _stage(empty)
    folder = _stage(staged, "delta-storage-4.4.0.jar", "delta-spark_4.2_2.13-4.4.0.jar", "README.txt")
    _stage(other, "x.jar")
    assert staged_delta_jars([tmp_path / "missing", empty, staged, other]) == [
        str(folder / "delta-spark_4.2_2.13-4.4.0.jar"), str(folder / "delta-storage-4.4.0.jar")]
    assert staged_delta_jars([tmp_path / "missing", empty]) == []


def test_explicit_jars_win_and_only_sink_delta_looks_for_staged_ones(tmp_path, monkeypatch):
    folder = _stage(tmp_path, "delta-spark_4.2_2.13-4.4.0.jar")
    monkeypatch.chdir(tmp_path)  # the current directory is searched first
    assert delta_jars_for("delta", []) == [str(folder / "delta-spark_4.2_2.13-4.4.0.jar")]
    assert delta_jars_for("delta", ["/opt/my.jar"]) == ["/opt/my.jar"]
    assert delta_jars_for("deltalake", []) == []
