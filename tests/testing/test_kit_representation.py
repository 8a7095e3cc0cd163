"""Issue 37: the kit models how other languages and systems hold values, runs many cases in one process, and
judges state.

* The representation model: the generator reaches every representation edge; every encoding of a case reads
  back as the same case; the representation vectors need the ``representation`` feature (so an
  implementation can decline it) and the explicit encoding writes every optional field.
* ``oij vectors verify --features``: a cond-less implementation passes ``all,-cond`` and a wrong one fails.
* The session protocol: a correct session implementation conforms; one that does not reset between cases is
  caught and told apart from a per-case bug; a command that does not speak it fails as a crash; no process
  is left behind.
* ``oij conform --state-bound``: ``oij join -`` and the oracle (by its state lines) pass; an implementation that
  never purges fails by its memory; a wrong answer on the long cases fails.
* The two oracle mutants an audit found not equivalent are killed by a vector of a few events.
* ``oij join --stats`` equals counts computed from the specification.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from oij.spec.model import StreamTuple, Watermark
from oij.spec.profiles import CANONICAL
from oij.spec.purge import compute_needed
from oij.spec.stream import compute_late, compute_stream_result
from oij.spec.watermark import arrival_watermarks

from oij.cli import main
from oij.testing import Case
from oij.testing._case import case_features
from oij.testing._cases import cases
from oij.testing._edges import EDGES, compute_edges
from oij.testing._features import DEFAULT_FEATURES
from oij.testing._runner import Session, judge
from oij.testing._state import check_state
from oij.testing._vectors import vectors
from tests.forking import forked_commands
from tests.procs import alive
from tests.testing.test_kit_regressions import in_process

IMPLS = Path(__file__).parent.parent / "impls"
REPO = Path(__file__).parent.parent.parent
BUGS = [sys.executable, str(IMPLS / "accum_bugs.py")]
OIJ = [sys.executable, "-m", "oij.cli"]


def conform(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, str]:
    rc = main(["conform", "--replay-out", str(tmp_path / "fail.jsonl"), *args])
    return rc, capsys.readouterr().out


# -- the representation model ------------------------------------------------------------------------------------

def test_the_generator_reaches_every_representation_edge() -> None:
    hits: Counter[str] = Counter()

    @seed(0)
    @settings(max_examples=1000, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases())
    def draw(case: Case) -> None:
        hits.update(compute_edges(case))

    draw()
    missed = [e for e in EDGES if e.startswith("representation") and hits[e] == 0]
    assert not missed, (missed, hits)


def test_without_the_feature_no_case_needs_it() -> None:
    @settings(max_examples=300, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(DEFAULT_FEATURES - {"representation"}))
    def draw(case: Case) -> None:
        assert "representation" not in case_features(case), case.to_jsonl()

    draw()


@settings(max_examples=300, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases(), st.sampled_from(["full", "minimal", "explicit", "mixed:1", "mixed:77", "mixed:4095"]))
def test_every_encoding_reads_back_as_the_same_case(case: Case, encoding: str) -> None:
    text = Case(case.query, case.events, encoding=encoding).to_jsonl()
    back = Case.from_jsonl(text)
    assert back.query == case.query and back.events == case.events, text


def test_the_explicit_encoding_writes_every_optional_field_and_minimal_none() -> None:
    v = next(v for v in vectors() if v.name == "defaults-explicit")
    lines = [json.loads(x) for x in v.case.to_jsonl().splitlines()]
    assert {"join", "lateness", "channels", "lower_inclusive", "aggregate"} <= set(lines[0])
    assert all({"value", "channel"} <= set(x) for x in lines if x["type"] == "tuple")
    minimal = [json.loads(x) for x in Case(v.case.query, v.case.events, encoding="minimal").to_jsonl().splitlines()]
    assert not any("channel" in x or "join" in x for x in minimal)


def test_a_mixed_vector_has_channel_0_both_omitted_and_explicit() -> None:
    v = next(v for v in vectors() if v.name == "channel-0-omitted-and-explicit")
    marks = [json.loads(x) for x in v.case.to_jsonl().splitlines() if '"watermark"' in x]
    assert [("channel" in m) for m in marks[:3]] == [False, True, True]


def test_representation_vectors_need_the_feature() -> None:
    group = [v for v in vectors() if v.feature == "representation"]
    assert len(group) >= 30
    plain = {"keys-leading-zero", "keys-decimal-string", "channelless-watermark-two-channels",
             "channel-0-omitted-and-explicit", "defaults-explicit", "defaults-mixed", "keys-reordered-spaced"}
    # the text, not the values: every reader (2^53 is a representation edge as well)
    plain |= {v.name for v in group if v.name.startswith("int-values-") and "2p53" not in v.name}
    for v in group:
        assert ("representation" in case_features(v.case)) == (v.name not in plain), v.name


# -- oij vectors verify --features --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def vector_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("vectors")
    assert main(["vectors", "export", str(d)]) == 0
    return d


@pytest.mark.timeout(300)
def test_verify_features_passes_a_cond_less_implementation_and_fails_a_wrong_one(
        vector_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The whole set, with the command run in this process (:func:`tests.testing.test_kit_regressions.in_process`:
    the same text in, the same lines out; kit-power's recording runs the same implementation on every vector as
    a process); then the two negative controls as real processes, on a subset."""
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("oij.testing._runner.run_command", in_process)
        rc = main(["vectors", "verify", str(vector_dir), "--features=all,-cond", "--", *BUGS, "correct"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "0 failed" in out and "skipped: they need features not claimed: cond" in out, out
    # the two negative controls on a subset (a process per vector): the first vector of every feature, every
    # representation vector and every cond vector
    rows = [json.loads(x) for x in (vector_dir / "manifest.jsonl").read_text().splitlines()]
    firsts = {r["feature"]: r["case"] for r in reversed(rows)}
    picked = [r for r in rows
              if r["case"] in firsts.values() or r["feature"] == "representation" or "cond" in r["features"]]
    sub = _vector_subset(vector_dir, tmp_path / "sub", picked)
    with forked_commands():  # a process per vector, forked (tests/testing/test_restarts.py); the second one starts it
        rc = main(["vectors", "verify", str(sub), "-j", "2", "--features=all,-cond", "--", *BUGS,
                   "keys-case-insensitive"])
    out = capsys.readouterr().out
    assert rc == 1 and "FAIL representation/keys-case" in out, out
    # without --features the cond vectors run, and the cond-less implementation fails them (on the cond vectors
    # of the subset: the others it passes, in the run above and in this process)
    conds = _vector_subset(vector_dir, tmp_path / "conds", [r for r in picked if "cond" in r["features"]])
    rc = main(["vectors", "verify", str(conds), "-j", "2", "--", *BUGS, "correct"])
    assert rc == 1 and "cond" in capsys.readouterr().out


def _vector_subset(src: Path, dst: Path, rows: list[dict[str, object]]) -> Path:
    """A vector directory holding the manifest rows ``rows`` of ``src`` and their files."""
    import shutil

    for row in rows:
        for f in (f"{row['case']}.in.jsonl", str(row["expected"])):
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / f, dst / f)
    (dst / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dst


def test_verify_features_names_an_unknown_feature(vector_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vectors", "verify", str(vector_dir), "--features=all,-nope", "--", *BUGS, "correct"]) == 2
    assert "unknown feature 'nope'" in capsys.readouterr().err


def test_the_manifest_lists_each_vectors_features(vector_dir: Path) -> None:
    rows = [json.loads(x) for x in (vector_dir / "manifest.jsonl").read_text().splitlines()]
    assert all(isinstance(r["features"], list) and r["features"] for r in rows)
    assert any("cond" in r["features"] for r in rows) and any("representation" in r["features"] for r in rows)


# -- the session protocol -----------------------------------------------------------------------------------------

@pytest.mark.timeout(300)
def test_a_session_conforms_and_is_judged_as_one_process_per_case(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, out = conform(capsys, tmp_path, "--session", "--max-examples", "60", "--", *BUGS, "correct")
    assert rc == 0 and "conforms" in out, out
    rc, out = conform(capsys, tmp_path, "--session", "--", *BUGS, "keys-case-insensitive")
    assert rc == 1 and "minimal case of 2 events" in out and "fresh session" not in out, out


@pytest.mark.timeout(300)
def test_a_session_that_keeps_state_between_cases_is_caught_and_named(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, out = conform(capsys, tmp_path, "--session", "--max-examples", "30", "--", *BUGS, "leaky-session")
    assert rc == 1 and "does not reset its state between cases" in out, out
    rc, out = conform(capsys, tmp_path, "--max-examples", "30", "--no-vectors", "--small-scope", "0", "--", *BUGS,
                      "leaky-session")
    assert rc == 0, out  # per case it is correct: only the session exposes it (the same generated cases)


@pytest.mark.timeout(120)
def test_a_command_without_the_session_protocol_fails_as_a_crash_and_leaves_nothing() -> None:
    case = next(v.case for v in vectors() if v.name == "ties")
    with Session([sys.executable, str(IMPLS / "accum_oij.py")]) as s:  # answers, then exits: no end line
        out = s.run(case, 10.0)
        assert out.got is None and out.problem is not None and "before the end line" in out.problem
        with Session([*BUGS, "correct"]) as good:
            for _ in range(3):
                assert judge(case, good.run(case, 10.0), CANONICAL, DEFAULT_FEATURES) is None
            assert good.starts == 1 and good.proc is not None
            pid = good.proc.pid
    assert not alive(pid)


@pytest.mark.timeout(120)
def test_a_session_case_past_its_timeout_is_a_hang_and_the_next_case_starts_fresh() -> None:
    case = next(v.case for v in vectors() if v.name == "ties")
    script = ("import os,sys,time\n"
              "for line in sys.stdin:\n"
              "    if '\"end\"' in line:\n"
              "        time.sleep(30 if os.path.exists(sys.argv[1]) else 0)\n"
              "        print('{\"type\":\"pair\",\"base\":1,\"probe\":2}'); print('{\"type\":\"end\"}', flush=True)\n")
    import tempfile

    with tempfile.NamedTemporaryFile() as flag, Session([sys.executable, "-c", script, flag.name]) as s:
        out = s.run(case, 1.0)
        assert out.problem is not None and out.problem.startswith("hang"), out
        flag.close()  # removed: the next process answers at once
        assert judge(case, s.run(case, 10.0), CANONICAL, DEFAULT_FEATURES) is None
        assert s.starts == 2


# -- state as part of conformance ---------------------------------------------------------------------------------

@pytest.mark.timeout(300)
def test_state_bound_passes_the_oracle_and_fails_an_implementation_that_never_purges() -> None:
    feats = frozenset({"watermarks", "lateness", "aggregates", "left", "channels"})
    ok = check_state([*OIJ, "join", "-"], feats)
    assert ok.ok and [r.measure for r in ok.runs] == ["resident memory"] * 3, ok.text()
    lines = check_state([sys.executable, str(IMPLS / "oracle_cmd.py")], feats)
    assert lines.ok and {r.measure for r in lines.runs} == {"state lines"}, lines.text()
    assert all(r.late < 500 for r in lines.runs), lines.text()
    # 2 * 10^4 events (not the default 10^5) for the negative control: a state that never shrinks grows ~500 bytes
    # an event from the first one, 40 times the slope allowed (measured), so the size adds no check power
    bad = check_state([*BUGS, "never-purges"], feats, events=20_000)
    assert not bad.ok and all(r.problem and "grows with the stream" in r.problem for r in bad.runs), bad.text()


@pytest.mark.timeout(300)
def test_state_bound_judges_the_slope_and_fails_a_compact_leak() -> None:
    """Negative control of issue 46: ``compact-leak`` purges its probes but keeps each one's trace packed in an
    int (about 44 bytes per tuple, 2.7 MiB over the 10^5-event case): inside "a quarter plus 8 MiB", caught by
    its slope per event against the oracle's.  The correct implementation's slope is within the allowance."""
    feats = frozenset({"watermarks", "lateness", "aggregates", "left", "channels"})
    leak = check_state([*BUGS, "compact-leak"], feats)
    assert not leak.ok, leak.text()
    for r in leak.runs:
        assert r.late - r.early < r.early // 4 + (8 << 20), r.line()  # the old allowance alone passes it
        assert r.slope > r.allowed and r.problem and "grows with the stream" in r.problem, r.line()
    ok = check_state([*BUGS, "correct"], feats)
    assert ok.ok and all(r.slope <= r.allowed for r in ok.runs), ok.text()


def test_slope_and_the_oracles_own_curve() -> None:
    from oij.testing._state import oracle_stored, slope, state_cases

    assert slope([(k, 7 * k + 3) for k in range(0, 1000, 50)], 1000) == pytest.approx(7.0)
    assert slope([(k, 100 + (k % 3)) for k in range(0, 1000, 50)], 1000) == pytest.approx(0.0, abs=0.01)
    assert slope([(900, 5)], 1000) == 0.0
    case = state_cases(frozenset({"watermarks"}), 5000)[0]
    curve = oracle_stored(case, range(500, 5001, 500))
    assert len(curve) == 10 and 0 < max(v for _, v in curve) < 500  # the live window, not the stream
    assert abs(slope(curve, 5000)) < 0.01


@pytest.mark.timeout(300)
def test_state_bound_fails_a_wrong_answer_and_the_command_reports_it(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, out = conform(capsys, tmp_path, "--state-bound", "--max-examples", "0", "--no-vectors", "--state-events",
                      "20000", "--features", "watermarks", "--", *BUGS, "key-hash-bucket")
    assert rc == 1 and "wrong output" in out, out
    assert main(["conform", "--max-examples", "0", "--", *BUGS, "correct"]) == 2
    assert "--max-examples 0 only with --state-bound" in capsys.readouterr().err


# -- the audit's two oracle mutants --------------------------------------------------------------------------------

@pytest.mark.timeout(600)
@pytest.mark.parametrize("mutant", ["core/ReplaceOrWithAnd:15", "core/ReplaceComparisonOperator_GtE_Eq:6"])
def test_the_audits_two_mutants_are_told_apart_by_a_vector(mutant: str) -> None:
    import subprocess

    from oij.bench.kitpower.mutants import TARGETS, enumerate_mutants, mutant_source
    from oij.bench.kitpower.runner import mutant_dir
    from oij.testing._protocol import ProtocolError, compare, expected_output, parse_output

    t = TARGETS["oracle"]
    source = (REPO / t.path).read_text()
    op, occ = mutant.rsplit(":", 1)
    m = next(x for x in enumerate_mutants(t, source) if x.operator == op and x.occurrence == int(occ))
    assert "cur_lo >= x" in m.line
    case = next(v.case for v in vectors() if v.name == "count-final-window-above-purge-edge")
    with mutant_dir(t, REPO, mutant_source(m, source)) as (_, _, cmd):
        got = subprocess.run(cmd, input=case.to_jsonl(), capture_output=True, text=True, check=False)
    try:  # a crash, a line the protocol rejects (a count of -1) or a wrong row: each tells it apart
        told_apart = got.returncode != 0 or bool(compare(expected_output(case), parse_output(got.stdout)))
    except ProtocolError:
        told_apart = True
    assert told_apart, got.stdout
    # and the unmutated oracle, run the same way, gives the expected rows (the check can pass)
    with mutant_dir(t, REPO, source) as (_, _, cmd):
        same = subprocess.run(cmd, input=case.to_jsonl(), capture_output=True, text=True, check=True)
    assert not compare(expected_output(case), parse_output(same.stdout))


# -- oij join --stats against the specification -------------------------------------------------------------------

def spec_stats(case: Case) -> dict[str, object]:
    """What ``oij join --stats`` must report, from the specification's functions: the events read, the late
    tuples, the peak over every W move of the tuples an operator must still hold (``compute_needed``), and in the
    pairs mode the entries in a window (one per pair found) and an effectiveness of 1 (only in-window entries
    are visited)."""
    q, evs = case.query, list(case.events)
    ws = arrival_watermarks(evs, q)
    moves = [i for i in range(1, len(evs)) if ws[i] != ws[i - 1]]
    out: dict[str, object] = {
        "events": len(evs),
        "late": len(compute_late(evs, q)),
        "retained_state_peak": max((len(compute_needed(evs[:i], q)) for i in moves), default=0),
    }
    if q.aggregate is None:
        pairs = sum(1 for p in compute_stream_result(evs, q).pairs if p[1] is not None)
        out |= {"entries_in_window": pairs, "entries_visited": pairs, "effectiveness": 1.0}
    return out


@settings(max_examples=150, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases(DEFAULT_FEATURES - {"representation"}))
def test_join_stats_equal_the_specifications_counts(case: Case) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        src, stats = Path(d) / "in.jsonl", Path(d) / "stats.json"
        src.write_text(case.to_jsonl())
        assert main(["join", str(src), "--stats", str(stats), "-o", str(Path(d) / "out.jsonl"),
                     "--no-progress"]) == 0
        got = json.loads(stats.read_text())
    want = spec_stats(case)
    assert {k: got[k] for k in want} == want, case.to_jsonl()
    samples = [s for _, s in got["retained_state_samples"]]
    assert max(samples, default=0) == got["retained_state_peak"]


def test_spec_stats_can_fail() -> None:
    """Negative control: the check sees a stats file that is one off."""
    case = next(v.case for v in vectors() if v.name == "below-w")
    want = spec_stats(case)
    assert want["late"] == 1 and want["entries_in_window"] == 0
    wrong = dict(want, late=0)
    assert wrong != want
    assert isinstance(case.events[1], Watermark) and isinstance(case.events[2], StreamTuple)


# -- equivalent means equivalent ---------------------------------------------------------------------------------

def test_every_equivalent_entry_carries_its_evidence_and_one_without_is_flagged() -> None:
    from oij.bench.kitpower.evidence import EVIDENCE_KINDS, load_manifest, missing_evidence

    manifest = load_manifest(IMPLS / "mutants.toml")
    assert manifest and missing_evidence(manifest) == []
    assert all(str(e["evidence"]).split(":", 1)[0].split(" ", 1)[0] in EVIDENCE_KINDS for e in manifest.values())
    key = next(iter(manifest))
    bare = {key: {k: v for k, v in manifest[key].items() if k != "evidence"}}
    assert missing_evidence(bare) == [f"{key[0]}:{key[1]}:{key[2]}"]
    assert missing_evidence({key: dict(manifest[key], evidence="reviewed")}) != []
