"""The conformance kit against bugs it was not built around.

* The bug shapes of tests/impls/accum_bugs.py (an implementation written
  from the docs, not from this repository's code) are each caught by
  ``oij conform`` at its defaults with a replay of at most 6 events, and by
  the generated cases alone (``--no-vectors``), so neither half of the kit
  hides behind the other (two of the runs start the command per case, the
  others run it in this process; the generated cases alone of every shape
  but one are tests/testing/test_kit_regressions.py's, the same search:
  :data:`SEARCH_ONLY_HERE`).
* The correct implementation and the oracle run as a command conform (at the defaults, in this process);
  kit-power's recording of it (a process pair per case) holds every case.
* A sample of cosmic-ray mutants, spread evenly over the list (not picked),
  is killed or listed as equivalent (the quick subset of ``oij bench
  kit-power``); the manifest of equivalent mutants names real mutants; and a
  survivor makes kit-power fail (negative control).
* The generator: every case uses only the claimed features; the rule-edge
  detector sees an edge and not its neighbour one tick off.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from oij.spec.model import Event, Query

from oij.bench.kitpower.runner import Recording
from oij.cli import main
from oij.testing import Case
from oij.testing._cases import case_features, cases, parse_features
from oij.testing._edges import EDGES, compute_edges, do_keys_collide
from oij.testing._runner import Outcome
from tests.budget import examples
from tests.impls.accum_bugs import BUGS
from tests.testing.test_kit_regressions import in_process, outcome_in_process

IMPLS = Path(__file__).parent.parent / "impls"
REPO = Path(__file__).parent.parent.parent
ACCUM = [sys.executable, str(IMPLS / "accum_oij.py")]


def conform(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as d:
        rc = main(["conform", "--replay-out", str(Path(d) / "fail.jsonl"), *args])
    return rc, capsys.readouterr().out


AS_A_PROCESS = {("base-final-at-edge", "with-vectors"), ("ties-probe-first-twice", "search-only")}
"""The runs whose command is a real process per case, one per half of the kit (the cheapest two); the others run
the command in this process (:func:`tests.testing.test_kit_regressions.in_process`: the same text in, the same
lines out), which turns thousands of process starts (about 150 CPU-seconds) into one each."""


SEARCH_ONLY_HERE = {bug for bug, vectors in AS_A_PROCESS if vectors == "search-only"}
"""The shapes whose search-only run (``--no-vectors --small-scope 0``) runs here: the one as a process.  Every other
shape's is the same search, with the same verdict, shrunk case and finder:
tests/testing/test_kit_regressions.py::test_a_default_run_still_catches_every_known_shape runs
:func:`oij.testing._runner.search` at the same defaults (200 cases, seed 0, no vectors, no small-scope stage) on
every shape of accum_bugs.py with the command in its process, and asserts a failure of at most 6 events found by
``search, case N``; ``oij conform`` calls that search with these options (its ``fixed_jobs`` 2 searches a failure
again one at a time, so its verdict is that of 1), and the run here checks that path, as a process, end to end."""


@pytest.mark.parametrize(("bug", "vectors"), [(bug, "with-vectors") for bug in sorted(BUGS)]
                         + [(bug, "search-only") for bug in sorted(SEARCH_ONLY_HERE)])
def test_each_bug_shape_is_caught_at_the_defaults_with_a_small_replay(
        bug: str, vectors: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    if (bug, vectors) not in AS_A_PROCESS:
        monkeypatch.setattr("oij.testing._runner.run_command", in_process)
    extra = ["--no-vectors", "--small-scope", "0"] if vectors == "search-only" else []
    rc, out = conform(capsys, *extra, "--", sys.executable, str(IMPLS / "accum_bugs.py"), bug)
    assert rc == 1, out
    m = re.search(r"minimal case of (\d+) events", out)
    assert m is not None and int(m.group(1)) <= 6, out
    found = re.search(r"^found by: (.*)$", out, re.M)
    assert found is not None, out
    if vectors == "search-only":
        assert found.group(1).startswith("search, case "), out


def test_the_oracle_as_a_command_conforms_with_cond(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge is the oracle itself: this checks oracle_cmd.py's reading and writing (the vectors, then 10
    cases), its ``main`` run in this process on each case's text (kit-power and the state-bound tests run it as a
    process).  Negative control: an oracle_cmd.py that drops the cond of the query fails the same run."""
    from tests.impls import oracle_cmd

    def oracle_in_process(argv: Sequence[str], stdin: str, timeout: float) -> Outcome:
        del argv, timeout
        return outcome_in_process(oracle_cmd.main, stdin)

    monkeypatch.setattr("oij.testing._runner.run_command", oracle_in_process)
    args = ("--features", "all,cond", "--max-examples", "10", "--", sys.executable, str(IMPLS / "oracle_cmd.py"))
    rc, out = conform(capsys, *args)
    assert rc == 0, out
    real = oracle_cmd.read_case

    def without_cond(lines: list[str]) -> tuple[Query, list[Event]]:
        q, events = real(lines)
        return dc_replace(q, cond=()), events

    monkeypatch.setattr(oracle_cmd, "read_case", without_cond)
    rc, out = conform(capsys, *args)
    assert rc == 1 and "does NOT conform" in out, out


SMALL_RECORDING = ("--no-vectors", "--small-scope", "0")
"""The recording's own run: the default run's 200 generated cases without its 418 vectors and its small-scope
covering array (two processes per case: about 50 CPU-seconds at the defaults, the cost of ``oij bench
kit-power``'s recording, not of what it decides; the covering array alone was 15; at 150 cases no case hits the
edge "a probe inside a window modulo 2^32" and the run warns, at 100 the sample's
accum:core/ReplaceComparisonOperator_GtE_LtE:1 is no longer told apart).  A mutant whose replay differs
from it gets the real run at the defaults, as in the benchmark; one whose replay agrees survives the replay and
goes on to the manifest and ``--state-bound`` (so a recording too small to tell a sampled mutant apart fails the
sample's test, it cannot pass it)."""


@pytest.fixture(scope="session")
def accum_recording(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """kit-power's recording of the unmutated independent implementation (:func:`oij.bench.kitpower.runner.record`:
    ``oij conform`` as a process, each case through the recorder script, which passes every answer through,
    then replayed once with line tracing), on :data:`SMALL_RECORDING`.  A run that does not conform raises.
    Session-scoped: kept by a worker that runs other modules between its two users."""
    from oij.bench.kitpower.mutants import TARGETS
    from oij.bench.kitpower.runner import record

    return record(TARGETS["accum"], REPO, tmp_path_factory.mktemp("kit-power"), 600.0, extra=SMALL_RECORDING)


def test_the_recording_holds_every_case_and_the_lines_run(accum_recording: Recording) -> None:
    out = accum_recording.report
    assert out.startswith("conforms: ") and re.search(
        r"\(0 test vectors, then 200 generated cases\)", out), out
    assert "warning" not in out, out
    assert len(list(accum_recording.dir.glob("*.in"))) == int(out.split()[1]), out  # every case was recorded
    source = (REPO / "tests" / "impls" / "accum_oij.py").read_text().splitlines()
    loop = source.index("    for line in sys.stdin:") + 1  # main's loop over the case: every case runs it
    assert accum_recording.reaches(loop) and not accum_recording.reaches(len(source) + 10), accum_recording.ran


@pytest.mark.timeout(900)
def test_the_independent_implementation_conforms(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``oij conform`` at its defaults (every vector, then 200 generated cases) passes accum_oij.py, its ``main``
    run in this process on each case's text (:func:`tests.testing.test_kit_regressions.in_process`; the
    recording above runs it as a process, on fewer cases).  Its negative controls are the bug shapes above,
    each caught at the same defaults."""
    monkeypatch.setattr("oij.testing._runner.run_command", in_process)
    rc, out = conform(capsys, "--", *ACCUM)
    assert rc == 0, out
    assert out.startswith("conforms: ") and re.search(
        r"\(\d+ test vectors, then \d+ small-scope cases \[covering array\], then 200 generated cases\)", out), out
    assert "warning" not in out, out


def _kit_power(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "kp.json"
    rc = main(["bench", "kit-power", "--repo", str(REPO), "--out", str(out), *args])
    return rc, json.loads(out.read_text())


@pytest.mark.timeout(900)
def test_a_sample_of_mutants_is_killed_or_equivalent_and_a_survivor_fails(
        tmp_path: Path, accum_recording: Recording, monkeypatch: pytest.MonkeyPatch) -> None:
    """Six mutants spread evenly over the list (not picked) are killed or equivalent, with replays of at most 6
    events; the first equivalent of the manifest on a line the recording reaches rides along in the same run
    (one recording of the correct run serves both) and is excused by the replay.  The recording is the
    fixture's (kit-power's own :func:`~oij.bench.kitpower.runner.record`, on fewer cases).  Negative control: that
    mutant, run again with an empty manifest, survives (its replay gives every recorded answer) and kit-power
    exits 1.  (A survivor judged by a full real oij conform run is the fixture's verdict on the unmutated
    implementation: the same ``run_mutant`` path; a second one here cost 30 CPU-seconds.)"""
    from oij.bench.kitpower import measure, runner
    from oij.bench.kitpower.evidence import load_manifest
    from oij.bench.kitpower.mutants import TARGETS, Target, enumerate_mutants, pick_evenly

    real_record = runner.record

    def recorded(t: Target, repo: Path, into: Path, timeout: float,
                 extra: tuple[str, ...] = ()) -> Recording:
        if (t, repo.resolve(), extra) == (TARGETS["accum"], REPO.resolve(), ()):
            return accum_recording  # the benchmark's call, answered with the small recording
        return real_record(t, repo, into, timeout, extra)

    monkeypatch.setattr(measure, "record", recorded)
    target = TARGETS["accum"]
    every = enumerate_mutants(target, (REPO / target.path).read_text())
    sample = pick_evenly(every, 6)
    keys = [f"{m.target}:{m.operator}:{m.occurrence}" for m in sample]
    line_of = {(m.target, m.operator, m.occurrence): m.line_no for m in every}
    # the first equivalent of the manifest on a line the recording reaches (so that its replay runs: the first
    # ones are on the overflow of an exact sum past the double range, which only the vectors reach)
    eq_target, op, occ = next(k for k in load_manifest(IMPLS / "mutants.toml")
                              if k[0] == "accum" and k in line_of and accum_recording.reaches(line_of[k]))
    eq = f"{eq_target}:{op}:{occ}"
    # --state-bound: one of the six (accum:core/ReplaceAndWithOr:0) keeps every probe of an aggregate; no short
    # case tells it apart, the long cases do (it is not in the manifest: it is not equivalent).  It walks all it
    # keeps on every move of W, so on a long sum case it is quadratic and is killed as a hang: 10,000 events and a
    # 4 s limit show that as 100,000 and kit-power's 120 s do (there it burned a core for the whole 120 s; at
    # 20,000 events it needs about a minute, so about 15 s at 10,000; a correct target's long cases take 0.1-0.7 s
    # of wall time each at 10,000 under a load of 17 on two cores: the limit keeps the margin of 20,000 and 8 s,
    # and the hang burns half as much)
    monkeypatch.setattr(measure, "STATE_TIMEOUT", 4.0)
    rc, res = _kit_power(tmp_path, "--targets", "accum", "--only", ",".join([*keys, eq]), "-j", "2", "--state-bound",
                         "--state-events", "10000")
    mutants = {f"{m['target']}:{m['operator']}:{m['occurrence']}": m for m in res["mutants"]}
    assert set(keys) | {eq} == set(mutants)
    assert rc == 0, [m for m in mutants.values() if m["verdict"] not in ("killed", "equivalent")]
    for m in mutants.values():
        if m["verdict"] == "killed" and m["decided"] == "state-bound":  # a long case, no replay to shrink
            assert m["found_by"].startswith("state-bound "), m
        elif m["verdict"] == "killed":
            assert m["replay_events"] is not None and m["replay_events"] <= 6, m
    assert mutants[eq]["verdict"] == "equivalent" and mutants[eq]["kind"] == "replayed"
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    rc, res = _kit_power(tmp_path, "--targets", "accum", "--only", eq, "--manifest", str(empty))
    assert rc == 1 and [m["verdict"] for m in res["mutants"]] == ["survived"]
    assert res["mutants"][0]["kind"] == "replayed"


def _replay(rec: Path, *cmd: str) -> int:
    import subprocess

    return subprocess.run([sys.executable, "-m", "oij.bench.mutrun", "replay", str(rec), "--", sys.executable,
                           *cmd], capture_output=True, text=True, timeout=300, check=False).returncode


def _record_vectors(tmp_path: Path, rows: int = 0) -> Path:
    """A recording as kit-power makes one (cases and the correct implementation's answers), of 40 vectors
    (with at least ``rows`` result rows each)."""
    import subprocess

    from oij.testing import expected_output
    from oij.testing._cases import case_features, parse_features
    from oij.testing._protocol import all_rows
    from oij.testing._vectors import vectors

    rec = tmp_path / "rec"
    rec.mkdir()
    claimed = parse_features("all")
    picked = [v for v in vectors() if v.feature in ("bounds", "keys", "state-edges", "late", "aggregates")
              and case_features(v.case) <= claimed and len(all_rows(expected_output(v.case))) >= rows][:40]
    for i, v in enumerate(picked):
        text = v.case.to_jsonl()
        (rec / f"{i:05d}.in").write_text(text)
        (rec / f"{i:05d}.out").write_bytes(subprocess.run([sys.executable, str(ACCUM[1])], input=text.encode(),
                                                          capture_output=True, check=True).stdout)
    return rec


@pytest.fixture(scope="module")
def vector_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`_record_vectors` of 40 vectors with at least 2 result rows each, for both replay tests below (read
    only: a replay writes its differences elsewhere): 40 runs of accum_oij.py as a process, once."""
    return _record_vectors(tmp_path_factory.mktemp("vectors"), rows=2)


def test_a_replay_tells_a_changed_answer_from_the_recorded_one(vector_recording: Path) -> None:
    """The in-process replay behind kit-power's fast path: the recorded answers of the correct implementation
    replay as equal (exit 0); a bug shape that changes one answer does not (exit 1: the negative control)."""
    rec = vector_recording
    assert _replay(rec, str(ACCUM[1])) == 0
    assert _replay(rec, str(IMPLS / "accum_bugs.py"), "ties-twice") == 1


REVERSED = """import subprocess, sys
out = subprocess.run([sys.executable, {accum!r}], input=sys.stdin.buffer.read(), capture_output=True).stdout
sys.stdout.write("".join(reversed(out.decode().splitlines(True))))
"""


def test_a_judged_replay_kills_a_wrong_answer_and_not_a_reordered_one(tmp_path: Path,
                                                                       vector_recording: Path) -> None:
    """``--judge-in-replay``: a replay's differing answers are judged as oij conform judges them.  A bug shape's
    wrong answer is a kill (confirmed by a fresh run); the right answer in another line order differs byte for
    byte but is no kill (the negative control: a byte comparison alone would call it one)."""
    import subprocess

    from oij.bench.kitpower.mutants import Mutant
    from oij.bench.kitpower.runner import judge_replay

    rec = vector_recording
    rev = tmp_path / "reversed.py"
    rev.write_text(REVERSED.format(accum=str(ACCUM[1])))
    for name, cmd, killed in [("bug", [str(IMPLS / "accum_bugs.py"), "ties-twice"], True),
                              ("reordered", [str(rev)], False)]:
        diffs = tmp_path / f"diffs-{name}"
        diffs.mkdir()
        rc = subprocess.run([sys.executable, "-m", "oij.bench.mutrun", "replay", f"--diffs={diffs}",
                             "--case-timeout=10", str(rec), "--", sys.executable, *cmd], capture_output=True,
                            text=True, timeout=300, check=False).returncode
        assert rc == 1 and any(diffs.iterdir()), name  # both differ from the recording byte for byte
        m = Mutant("accum", "none", 0, 0, "")
        assert judge_replay(m, Recording(rec, set(), {}, 0.0), diffs, [sys.executable, *cmd], "all") is killed
        assert (m.verdict, m.decided) == (("killed", "replay") if killed else ("", "")), name


def test_coverage_sees_the_statement_of_a_line() -> None:
    r = Recording(Path("."), {10}, {11: (10, 12), 20: (20, 20)}, 1.0)
    assert r.reaches(11) and r.reaches(10)
    assert not r.reaches(20)  # negative control: a statement none of whose lines ran


def test_the_manifest_names_real_mutants() -> None:
    from oij.bench.kitpower.evidence import load_manifest
    from oij.bench.kitpower.mutants import TARGETS, enumerate_mutants

    manifest = load_manifest(IMPLS / "mutants.toml")
    assert manifest, "the manifest lists no equivalent mutant"
    by_target = {n: {(m.operator, m.occurrence): m.line for m in enumerate_mutants(t, (REPO / t.path).read_text())}
                 for n, t in TARGETS.items()}
    for (target, op, occ), entry in manifest.items():
        assert (op, occ) in by_target[target], f"{target}:{op}:{occ} is no mutant"
        assert by_target[target][(op, occ)] == entry["line"].strip(), f"{target}:{op}:{occ} is stale"
        assert entry["reason"].strip(), f"{target}:{op}:{occ} has no reason"


@pytest.mark.parametrize("claimed", ["all", "lateness,late-report", "watermarks,exclusive", "all,-negative-ts",
                                     "watermarks,left,aggregates"])
def test_generated_cases_use_only_the_claimed_features(claimed: str) -> None:
    feats = parse_features(claimed)

    # 75 cases a claim (150 under OIJ_TESTS=full): the five claims together see 375, the negative control is
    # test_case_features_sees_what_a_case_uses
    @settings(max_examples=examples(75, 150), database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(cases(feats))
    def check(case: Case) -> None:
        assert case_features(case) <= feats, (case.scenario, case_features(case) - feats)

    check()


def test_case_features_sees_what_a_case_uses() -> None:
    """Negative control for the property above: a case with a str key, a negative ts and a regression needs
    those features."""
    case = Case.from_jsonl('{"type":"query","lower":0,"upper":1}\n{"type":"watermark","ts":5}\n'
                           '{"type":"watermark","ts":3}\n{"type":"tuple","side":"base","id":1,"ts":-4,"key":"k"}\n'
                           '{"type":"end"}\n')
    assert case_features(case) == {"watermarks", "regressions", "negative-ts", "mixed-keys"}


def _case(lines: list[str], query: str = '{"type":"query","lower":-2,"upper":0}') -> Case:
    return Case.from_jsonl("\n".join([query, *lines, '{"type":"end"}']) + "\n")


def t(side: str, i: int, ts: int, key: object = 1) -> str:
    return json.dumps({"type": "tuple", "side": side, "id": i, "ts": ts, "key": key})


def test_the_edge_detector_sees_an_edge_and_not_its_neighbour() -> None:
    wm = '{"type":"watermark","ts":%d}'
    # a probe at 10 with lo' = -2 is needed while W <= 12; a base arrives at W = 12, then at W = 13
    on = compute_edges(_case([t("probe", 1, 10), wm % 12, t("base", 2, 12)]))
    assert "probe purge: W == b.ts - lo'" in on and "probe purge: W == b.ts - lo' + 1" not in on
    past = compute_edges(_case([t("probe", 1, 10), wm % 13, t("base", 2, 13)]))
    assert "probe purge: W == b.ts - lo' + 1" in past and "probe purge: W == b.ts - lo'" not in past
    # a base at 5 is final once W > 5: a probe arriving at W = 5 is on its finality edge
    fin = compute_edges(_case([t("base", 1, 5), wm % 5, t("probe", 2, 5)]))
    assert {"base finality: W == hi(a)", "late rule: ts == W (on time)", "equal timestamps, base first",
            "upper bound, probe-triggered"} <= fin
    assert "late rule: ts == W - 1 (late)" not in fin
    assert compute_edges(_case([t("base", 1, 5, 1), t("probe", 2, 5, 9)])) == {"colliding keys"}
    assert compute_edges(_case([t("base", 1, 5, 1), t("probe", 2, 5, 2)])) == set()
    assert do_keys_collide(1, "1") and do_keys_collide("k", "k1") and do_keys_collide(-1, -2)
    assert not do_keys_collide(1, 2) and not do_keys_collide(1, 1)
    assert set(EDGES) >= on | past | fin
