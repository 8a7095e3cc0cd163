"""The ordinary Spark Structured Streaming job (oij.spark.userjob, ``oij userjob spark``): on a small workload of
issue 63's shape it runs by itself to the end, keeps the checkpoint it is given, and its output is a subset of the
batch join of all tuples (every pair of one key and in the window, none twice); a pair outside the window or a
duplicate planted in the output is caught by the same check (the negative controls)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from oij.spec.model import BASE, StreamTuple

from oij.errors import UsageError
from oij.io.userjob import read_workload
from oij.spark.userjob import run_spark_user_job
from tests.userjobs import batch_pairs, read_output, small_workload, violations

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def farthest_pair(events: Path, batch: set[tuple[int, int]]) -> bytes:
    """A pair line of a base and a probe of the same key as far apart in ts as the workload has (the negative
    control: tests/userjobs.py's outside_window_pair asks for one 5,000 past the window, which a workload of
    1,500 tuples spans no key by)."""
    _, tuples = read_workload(str(events))
    bases = [t for t in tuples if t.side == BASE]
    probes = [t for t in tuples if t.side != BASE]
    best: tuple[int, int, int] | None = None
    for key in {t.key for t in bases} & {t.key for t in probes}:
        ks = [t for t in bases if t.key == key], [t for t in probes if t.key == key]
        for a, b in ((min(ks[0], key=ts), max(ks[1], key=ts)), (max(ks[0], key=ts), min(ks[1], key=ts))):
            if best is None or abs(b.ts - a.ts) > best[0]:
                best = (abs(b.ts - a.ts), a.id, b.id)
    assert best is not None and (best[1], best[2]) not in batch, best  # outside the window
    return f'{{"type":"pair","base":{best[1]},"probe":{best[2]}}}\n'.encode()


def ts(t: StreamTuple) -> int:
    return t.ts


@dataclass
class Job:
    """One run of the ordinary job on a small workload, with its checkpoint kept."""

    events: Path
    out: Path
    ckpt: Path
    info: dict[str, Any]
    dir: Path


FILES = 6
"""Input files of the module's job: a micro-batch each."""


@pytest.fixture(scope="module")
def job(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Job:
    """The job on 1,500 tuples in six files, for the two tests below that read its output (one run: a job per
    test ran the same job again on another workload of the same shape)."""
    d = tmp_path_factory.mktemp("spark-userjob")
    events = small_workload(d, 1500)
    out, ckpt = d / "spark.jsonl", d / "ckpt"
    info = run_spark_user_job(str(events), str(out), files=FILES, checkpoint_dir=str(ckpt))
    return Job(events, out, ckpt, info, d)


def test_spark_user_job_output_is_explained_by_the_batch_join(spark: Any, job: Job) -> None:
    events, info, ckpt = job.events, job.info, job.ckpt
    lines = job.out.read_bytes().splitlines(keepends=True)
    batch = batch_pairs(events)
    assert violations(lines, events, batch) == []
    pairs, late = read_output(lines)
    assert info["rows"] == len(pairs) > 0.9 * len(batch) and late == []
    # one micro-batch per file, maybe no-data batches after them; the checkpoint is kept and says the same
    assert info["data_batches"] == info["files"] == FILES <= info["batches"]
    assert len([f for f in os.listdir(ckpt / "commits") if f.isdigit()]) == info["batches"]
    assert (ckpt / "offsets" / "0").exists()
    assert info["watermarks"] == sorted(info["watermarks"]) and info["watermarks"][0] == 0
    # negative controls: the same check rejects a pair outside the window, and a duplicate
    assert any("not in the batch join" in v for v in violations([*lines, farthest_pair(events, batch)], events,
                                                                batch))
    assert any("twice" in v for v in violations(sorted([*lines, lines[0]]), events, batch))


def test_spark_user_job_left_join_null_rows(spark: Any, tmp_path: Path) -> None:
    events = small_workload(tmp_path, 600)
    text = events.read_text().splitlines(keepends=True)
    text[0] = text[0].replace('"type":"query",', '"type":"query","join":"left",')
    left = tmp_path / "left.jsonl"
    left.write_text("".join(text))
    out = tmp_path / "left-out.jsonl"
    run_spark_user_job(str(left), str(out), files=2)
    lines = out.read_bytes().splitlines(keepends=True)
    assert violations(lines, events) == []
    pairs, _ = read_output(lines)
    nulls = {a for a, b in pairs if b is None}
    matched = {a for a, b in pairs if b is not None}
    assert nulls and not nulls & matched  # a base with a null row has no pair


def test_spark_user_job_refuses_what_it_cannot_run(tmp_path: Path) -> None:
    events = tmp_path / "wm.jsonl"
    events.write_text('{"type":"query","lower":-1,"upper":0}\n{"type":"watermark","ts":1}\n{"type":"end"}\n')
    with pytest.raises(UsageError, match="lateness mode"):
        run_spark_user_job(str(events), str(tmp_path / "o.jsonl"))
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "x").write_text("")
    with pytest.raises(UsageError, match="not empty"):
        run_spark_user_job(str(events), str(tmp_path / "o.jsonl"), checkpoint_dir=str(tmp_path / "ck"))
    assert not (tmp_path / "o.jsonl").exists()


def test_spark_user_job_judged_up_to_schedule_and_by_its_checkpoint(spark: Any, job: Job) -> None:
    """The output of the job as its users run it is admissible up to schedule (spark-ss, one arrival order from
    W 0) and exactly under the schedule its checkpoint records; the fixed-schedule check of the same output
    differs.  Negative controls: one lost pair of two tuples in other rows is rejected both ways."""
    from oij.bench.schedule import plant
    from oij.cli import main
    from oij.io.jsonlread import parse_result_lines
    from oij.io.jsonlwrite import result_lines
    from oij.io.userjob import read_workload

    events, out, ckpt = job.events, job.out, job.ckpt

    def check(got: Path, *args: str) -> int:
        return main(["check", str(events), "--got", f"spark={got}", "--no-progress", "--profile", "spark-ss",
                     "--out", str(job.dir / "chk"), *args])

    assert check(out, "--schedule", "any") == 0
    assert check(out, "--schedule", "spark-checkpoint", str(ckpt)) == 0
    assert check(out, "--no-spark", "--attribute", "none") == 1
    q, tuples = read_workload(str(events))
    with open(out, encoding="utf-8") as f:
        got = parse_result_lines(f)
    lost = job.dir / "lost.jsonl"
    lost.write_text("".join(result_lines(plant("missing", got, tuples, q.lateness or 0, q.upper))))
    assert check(lost, "--schedule", "any") == 1
    assert check(lost, "--schedule", "spark-checkpoint", str(ckpt)) == 1
