"""``oij check EVENTS --got NAME=PATH --schedule any``: an output judged up to schedule (oij/testing/_schedule.py),
as a user of a real engine runs it: the oracle's own output, a batch join of every tuple and an output of a
slower watermark are each admissible; a lost pair, a duplicate, a pair outside the window and a watermark that
moves back are each rejected with a witness and a replay case; bad options exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from oij.reference.batchjoin import compute_pair_columns
from oij.reference.oracle import run_events
from oij.spec.batch import Results
from oij.spec.model import StreamTuple

from oij.bench.schedule import PLANTS, plant
from oij.cli import main
from oij.io import open_events
from oij.io.jsonlwrite import result_lines
from oij.workloads import WorkloadParams, with_overrides, write_workload


def _workload(tmp_path: Path, **params: Any) -> tuple[Path, Any, list[Any]]:
    w = tmp_path / "w.jsonl"
    p = {"keys": 20, "lateness": 50, "delay_max": 50, "stragglers": 0.05, "straggler_max": 150, "rate": 100000.0,
         **params}
    write_workload(str(w), with_overrides(WorkloadParams(), p), 2000, 7)
    q, events, f = open_events(str(w))
    try:
        evs = list(events)
    finally:
        if f is not None:
            f.close()
    return w, q, evs


def _batch(q: Any, tuples: list[StreamTuple]) -> Results:
    b = [t for t in tuples if t.side == "base"]
    p = [t for t in tuples if t.side == "probe"]

    def col(xs: list[StreamTuple], f: str) -> Any:
        return np.array([getattr(x, f) for x in xs], np.int64)

    a, r = compute_pair_columns(col(b, "id"), col(b, "key"), col(b, "ts"), col(p, "id"), col(p, "key"),
                                col(p, "ts"), q.lower, q.upper)
    return Results(pairs=sorted(zip(a.tolist(), r.tolist(), strict=True))).canonical()


def _lagged(q: Any, tuples: list[StreamTuple], lag: int) -> Results:
    """The canonical result of a watermark that trails the eager bound by ``lag`` tuples (late rows kept)."""
    from oij.spec.model import End, Watermark

    evs: list[Any] = []
    mx = None
    hist: list[int] = []
    for t in tuples:
        mx = t.ts if mx is None else max(mx, t.ts)
        hist.append(mx - q.lateness)
        if len(hist) > lag:
            evs.append(Watermark(hist[-lag - 1]))
        evs.append(t._replace(channel=0))
    from dataclasses import replace

    return run_events([*evs, End()], replace(q, lateness=None, channels=1)).canonical()


def _check(tmp_path: Path, w: Path, got: Results, *args: str) -> tuple[int, dict[str, Any]]:
    g = tmp_path / "got.jsonl"
    g.write_text("".join(result_lines(got)))
    out = tmp_path / "chk"
    rc = main(["check", str(w), "--got", f"me={g}", "--schedule", "any", "--no-progress", "--out", str(out), *args])
    return rc, json.loads((out / "report.json").read_text())


def test_outputs_of_other_schedules_are_admissible(tmp_path: Path) -> None:
    w, q, evs = _workload(tmp_path)
    tuples = [e for e in evs if isinstance(e, StreamTuple)]
    canonical = run_events(evs, q).canonical()
    assert canonical.late, "the workload must have late tuples"
    for got in (canonical, _batch(q, tuples), _lagged(q, tuples, 40)):
        rc, rep = _check(tmp_path, w, got)
        assert rc == 0 and rep["schedule"][0]["admissible"], rep["schedule"]
    # the same outputs judged as today (one schedule, the eager one) differ: the mode is what accepts them
    rc = main(["check", str(w), "--got", f"me={tmp_path / 'got.jsonl'}", "--no-spark", "--attribute", "none",
               "--no-progress", "--out", str(tmp_path / "plain")])
    assert rc == 1


def test_a_lag_bound_rejects_a_batch_join(tmp_path: Path) -> None:
    w, q, evs = _workload(tmp_path)
    tuples = [e for e in evs if isinstance(e, StreamTuple)]
    rc, rep = _check(tmp_path, w, _batch(q, tuples), "--max-lag", "10")
    assert rc == 1 and rep["schedule"][0]["witnesses"][0]["kind"] == "order"
    rc, rep = _check(tmp_path, w, _lagged(q, tuples, 5), "--max-lag", "10")
    assert rc == 0, rep["schedule"]


@pytest.mark.parametrize("kind", [*PLANTS, "back-late"])
def test_each_planted_difference_is_found_with_a_replay_case(tmp_path: Path, kind: str) -> None:
    """On a lagging schedule's pairs (no late rows); ``back-late`` lists the tuple late, which makes the watermark
    that moves back an order witness (on pairs alone it is a pair both tuples of which stay on time)."""
    w, q, evs = _workload(tmp_path)
    tuples = [e for e in evs if isinstance(e, StreamTuple)]
    base = _lagged(q, tuples, 40)
    assert not base.late
    got = plant(kind.removesuffix("-late"), base, tuples, q.lateness, q.upper, list_late=kind == "back-late")
    rc, rep = _check(tmp_path, w, got)
    judged = rep["schedule"][0]
    assert rc == 1 and not judged["admissible"]
    want = {"missing": "missing", "duplicate": "duplicate", "outside": "row", "back": "missing",
            "back-late": "order"}[kind]
    assert judged["witnesses"][0]["kind"] == want, judged["witnesses"]
    replays = rep["replays"]["me"]
    assert replays and Path(replays[0]["file"]).exists()


def test_bad_schedule_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w, q, evs = _workload(tmp_path)
    g = tmp_path / "g.jsonl"
    g.write_text("".join(result_lines(run_events(evs, q))))
    for args in (["--schedule", "sometimes"], ["--schedule", "any", "--family", "wide"],
                 ["--schedule", "any", "--max-lag", "ten"], ["--schedule", "spark-checkpoint"]):
        rc = main(["check", str(w), "--got", f"me={g}", "--no-progress", "--out", str(tmp_path / "o"), *args])
        assert rc == 2, args
        err = capsys.readouterr().err
        assert "Traceback" not in err and err.strip().count("\n") == 0, err


ROWS = st.lists(st.one_of(
    st.builds(lambda a, b: {"type": "pair", "base": a, "probe": b}, st.integers(-5, 2**63 - 1),
              st.one_of(st.none(), st.integers(-2**63, 2**63 - 1))),
    st.builds(lambda a, n, v: {"type": "aggregate", "base": a, "count": n, "value": v}, st.integers(0, 99),
              st.integers(0, 9), st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False))),
    st.builds(lambda i: {"type": "late", "id": i}, st.integers(-9, 2**62))), max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ROWS, st.sampled_from(["plain", "spaces", "extra-field", "float-id", "string-id", "blank", "kind"]))
@example([{"type": "late", "id": 0}, {"type": "pair", "base": 9_007_199_254_740_993, "probe": None}], "plain")
@example([{"type": "late", "id": 0}, {"type": "pair", "base": 2**63 - 512, "probe": None}], "plain")
def test_the_columnar_got_reader_reads_what_read_got_reads(tmp_path: Path, rows: list[dict[str, Any]],
                                                           shape: str) -> None:
    """fast_output_columns gives read_got's rows exactly, or declines (None); it never reads other values."""
    from oij.spec.batch import Results as R

    from oij.testing._got import read_got
    from oij.testing._schedule import fast_output_columns, output_columns

    lines = [json.dumps(r, separators=(",", ":") if shape != "spaces" else (", ", ": ")) for r in rows]
    if rows and shape == "extra-field":
        lines[0] = lines[0][:-1] + ', "note": 1}'
    if rows and shape == "float-id" and "base" in rows[0]:
        lines[0] = lines[0].replace(f'"base":{rows[0]["base"]}', f'"base":{rows[0]["base"]}.0')
    if rows and shape == "string-id" and "id" in rows[0]:
        lines[0] = lines[0].replace(f'"id":{rows[0]["id"]}', f'"id":"{rows[0]["id"]}"')
    if rows and shape == "kind":
        lines[0] = lines[0].replace('"type"', '"kind"')
    text = "\n".join(lines) + ("\n\n" if shape == "blank" else "\n" if lines else "")
    path = tmp_path / "g.jsonl"
    path.write_text(text)
    fast = fast_output_columns(str(path))
    if fast is None:
        return
    import shutil

    shutil.rmtree(tmp_path / "parts", ignore_errors=True)
    read_got(str(path), {}, str(tmp_path / "parts"))
    slow = output_columns(str(tmp_path / "parts"))

    def as_results(o: Any) -> R:
        return R(pairs=[(int(a), None if n else int(b)) for a, b, n in zip(o.pair_base, o.pair_probe, o.pair_null,
                                                                          strict=True)],
                 aggregates=[(int(a), int(c), v) for a, c, v in zip(o.agg_base, o.agg_count, o.agg_value,
                                                                    strict=True)],
                 late=[int(x) for x in o.late]).canonical()

    assert as_results(fast) == as_results(slow)
    import pyarrow.dataset as ds

    from oij.testing._schedule import fast_got_table

    table = fast_got_table(str(path))
    parts = ds.dataset(str(tmp_path / "parts"), format="parquet").to_table()
    assert table.to_pylist() == parts.to_pylist()  # the very rows read_got writes, in order


def test_the_columnar_got_reader_declines_what_it_cannot_vouch_for(tmp_path: Path) -> None:
    """Negative control: each shape it must leave to read_got is declined."""
    from oij.testing._schedule import fast_output_columns

    for text in ('{"type":"pair","base":1.5,"probe":2}\n', '{"type":"pair","base":"1","probe":2}\n',
                 '{"type":"pair","probe":2}\n', '{"type":"odd","base":1}\n', '{"type":"pair","base":1}\r\n',
                 '{"type":"pair","base":1,"note":2}\n', '{"type":"late","id":1}\n\n{"type":"late","id":2}\n',
                 '{"type":"aggregate","base":1,"count":-1,"value":0.0}\n', '{"kind":"late","id":1}\n',
                 '{"type":"aggregate","base":1,"count":1,"value":1e400}\n'):
        p = tmp_path / "g.jsonl"
        p.write_text(text)
        assert fast_output_columns(str(p)) is None, text
    p.write_text('{"type":"pair","base":1,"probe":null}\n{"type":"late","id":-3}\n')
    got = fast_output_columns(str(p))
    assert got is not None and got.pair_null.tolist() == [True] and got.late.tolist() == [-3]


@pytest.mark.parametrize("params", [{"key_type": "str"}, {"watermark": "count", "base_channels": 2,
                                                         "probe_channels": 2, "lateness": 0}])
def test_the_columnar_event_reader_reads_what_the_spec_reads(tmp_path: Path, params: dict[str, Any]) -> None:
    """String keys and watermark mode (several channels) through the file path: the same tuples, keys and the
    spec's W at each arrival; the oracle's own output is admissible and a lost pair is not."""
    from oij.reference.schedule import TupleColumns
    from oij.spec.watermark import arrival_watermarks

    from oij.testing._schedule import tuple_columns_from_file

    w, q, evs = _workload(tmp_path, **params)
    q2, cols, fw = tuple_columns_from_file(str(w))
    tuples = [e for e in evs if isinstance(e, StreamTuple)]
    ref = TupleColumns.of(tuples)
    assert q2 == q
    assert cols.ids.tolist() == ref.ids.tolist() and cols.ts.tolist() == ref.ts.tolist()
    assert [cols.keys[k] for k in cols.key] == [t.key for t in tuples]
    if q.lateness is None:
        ws = [w for e, w in zip(evs, arrival_watermarks(evs, q), strict=False) if isinstance(e, StreamTuple)]
        assert fw is not None and [max(int(x), -(2**62)) for x in fw] == [max(x, -(2**62)) for x in ws]
        assert len(set(ws)) > 3
    else:
        assert fw is None
    canonical = run_events(evs, q).canonical()
    assert _check(tmp_path, w, canonical)[0] == 0
    assert _check(tmp_path, w, plant("missing", canonical, tuples, q.lateness or 0, q.upper))[0] == 1
