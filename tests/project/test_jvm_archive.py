"""tests/jvm_archive.py's housekeeping: a new class archive replaces the older ones of its kind."""

from __future__ import annotations

from pathlib import Path

from tests import jvm_archive


def test_a_new_archive_removes_the_older_ones_of_its_kind_only(tmp_path: Path) -> None:
    """Each new flink-ds jar or pyspark makes a new archive (60 to 180 MB); the old ones of that kind go, the other
    kind's stay (the negative control), and so does any other file."""
    for name in ("spark-aaaa.jsa", "spark-bbbb.jsa", "flink-cccc.jsa", "flink-dddd.jsa", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    gone = jvm_archive.prune(tmp_path / "flink-dddd.jsa")
    assert gone == [tmp_path / "flink-cccc.jsa"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flink-dddd.jsa", "notes.txt", "spark-aaaa.jsa",
                                                          "spark-bbbb.jsa"]
