"""The conformance kit checks itself: it catches every deliberately wrong implementation with a small
counterexample, passes the correct ones (the toy and the project's own engines, each run as a command),
reports protocol faults without crashing, names the profile a deviation follows, and its vectors are
deterministic."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given, settings
from oij.reference.oracle import run_events
from oij.spec.batch import Results
from oij.spec.model import End, Event, Query, Side, StreamTuple
from oij.spec.profiles import CANONICAL, PROFILES, compute_profile_result

from oij.cli import main
from oij.testing import Case, assert_conforms, cases, expected_output
from oij.testing._cases import FEATURES, parse_features
from oij.testing._protocol import ProtocolError, parse_output
from oij.testing._runner import Outcome, fingerprint, search
from oij.testing._verify import verify_vectors
from tests.budget import examples
from tests.forking import forked_commands
from tests.impls.toy_oij import BUGS
from tests.strategies import event_lists, queries
from tests.testing.test_kit_regressions import outcome_in_process

TOY = Path(__file__).parent.parent / "impls" / "toy_oij.py"
OIJ = [sys.executable, "-m", "oij.cli"]


def toy(bug: str = "") -> list[str]:
    return [sys.executable, str(TOY), *([bug] if bug else [])]


def conform(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as d:
        extra = [] if "--replay-out" in args else ["--replay-out", os.path.join(d, "fail.jsonl")]
        rc = main(["conform", *extra, *args])
    return rc, capsys.readouterr().out


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_every_wrong_implementation_is_caught_with_a_small_case(
        bug: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    replay = tmp_path / "fail.jsonl"
    # the search and its shrinking, a process per case forked (tests/testing/test_restarts.py: pipes, exit code
    # and timeout as before, no interpreter start); the replays below start the command
    with forked_commands():
        rc, out = conform(capsys, "--replay-out", str(replay), "--", *toy(bug))
    assert rc == 1, out
    m = re.search(r"minimal case of (\d+) events", out)
    assert m is not None and int(m.group(1)) <= 10, out
    assert "expected (canonical)" in out
    # the picture of the counterexample is drawn beside it (oij explain's timeline, the differences marked)
    svg = replay.with_suffix(".svg").read_text()
    assert svg.startswith("<svg") and ('stroke="#c0262d" stroke-width="1.5" stroke-dasharray' in svg
                                       or 'stroke-dasharray="2,2"' in svg or "problem" in out), out
    # the replay file reproduces the failure, and the correct toy passes it
    assert main(["conform", "--replay", str(replay), "--", *toy(bug)]) == 1
    assert main(["conform", "--replay", str(replay), "--", *toy()]) == 0


def _toy_in_process(argv: list[str], stdin: str, timeout: float) -> Outcome:
    """:func:`oij.testing._runner.run_command` for ``python toy_oij.py [BUG]``, run in this process (the same text
    in, the same lines out): for the long passing runs, where a process per case (hundreds) adds only start-up
    time; the failing runs above, the replays and the faults below start the command as a process."""
    from tests.impls import toy_oij

    del timeout
    assert argv[:2] == toy()[:2], argv
    return outcome_in_process(lambda: toy_oij.main(argv[2] if len(argv) > 2 else ""), stdin)


def test_the_correct_toy_conforms(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("oij.testing._runner.run_command", _toy_in_process)
    rc, out = conform(capsys, "--", *toy())
    assert rc == 0, out
    assert re.search(r"conforms: \d+ cases .*\((\d+) test vectors, then \d+ small-scope cases \[covering array\], "
                     r"then 200 generated cases\)", out), out
    for tag in ("tuple exactly on a bound", "late tuple", "left join", "aggregate over an empty window"):
        assert tag in out
    # every rule edge was hit by some generated case, so no warning
    assert "probe purge: W == b.ts - lo'" in out and "warning" not in out, out


def test_an_edge_no_case_hit_is_warned_about(capsys: pytest.CaptureFixture[str]) -> None:
    """Negative control for the coverage report: a run too short to reach every edge says so, naming the edge."""
    rc, out = conform(capsys, "--no-vectors", "--small-scope", "0", "--max-examples", "2", "--", *toy())
    assert rc == 0, out
    assert re.search(r"^warning: no generated case hit the edge '[^']+'", out, re.M), out


def _join_command_in_process(argv: list[str], stdin: str, timeout: float) -> Outcome:
    """:func:`oij.testing._runner.run_command` for ``python -m oij.cli join - ARGS``, run in this process by
    :func:`join_in_process` (one case at a time: the kit runs a command's cases two at a time, in threads)."""
    from tests.testing.test_kit_regressions import IN_PROCESS

    del timeout
    assert argv[:len(OIJ) + 2] == [*OIJ, "join", "-"], argv
    with IN_PROCESS:
        return join_in_process(*argv[len(OIJ) + 2:])(stdin)


@pytest.mark.parametrize("engine", [["join", "-"], ["run", "-", "--pattern", "kp", "--replicas", "2"],
                                    ["run", "-", "--pattern", "hp", "--replicas", "2"]])
def test_the_projects_own_engines_conform_as_commands(engine: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    feats = "all"  # aggregates too: KP/DP/HP sum exactly (parallel/runtime/exactsum.py; the next test's vector)
    # the vectors are verified against oij join in test_vectors_are_deterministic_and_verify; here the search
    if engine[0] == "join":
        # 60 generated cases with oij join run in this process (the same parser, reader, oracle and writer: what
        # a verdict needs); the command itself, a process per case, on the first 8 of them below
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("oij.testing._runner.run_command", _join_command_in_process)
            rc, out = conform(capsys, "--no-vectors", "--small-scope", "0", "--features", feats, "--max-examples",
                              "60", "--", *OIJ, *engine)
        assert rc == 0 and "conforms: 60 cases" in out, out
    rc, out = conform(capsys, "--no-vectors", "--small-scope", "0", "--features", feats, "--max-examples", "8", "--",
                      *OIJ, *engine)
    assert rc == 0 and "conforms: 8 cases" in out, out


def test_kp_sums_the_exact_vector_exactly(capsys: pytest.CaptureFixture[str]) -> None:
    """A bug the kit found once it ran the test vectors first: the event engines' KP/DP/HP summed in float64, so
    the vector 1e16 + 1 - 1e16 gave 0.0 where the exact sum is 1.0 (this test pinned that difference until the
    engines summed exactly, 2026-11-29: parallel/runtime/exactsum.py).  Now every engine conforms on it: the
    event engine, the block engine (oij.reference.block_oracle's exact integers) and oij join."""
    from oij.testing._vectors import vectors

    case = next(v.case for v in vectors() if (v.feature, v.name) == ("aggregates", "sum-exact"))
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "sum-exact.jsonl"
        f.write_text(case.to_jsonl())
        assert main(["conform", "--replay", str(f), "--", *OIJ, "join", "-"]) == 0
        assert main(["conform", "--replay", str(f), "--", *OIJ, "run", "-", "--pattern", "kp", "--replicas", "2",
                     "--engine", "blocks"]) == 0
        assert main(["conform", "--replay", str(f), "--", *OIJ, "run", "-", "--pattern", "kp", "--replicas", "2",
                     "--engine", "events"]) == 0
    out = capsys.readouterr().out
    assert "base=4 count=3" not in out, out  # no differing row was reported


def test_cond_is_claimed_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    """``all`` leaves the format-1.1 cond out (a 1.0 implementation still conforms); ``all,cond`` tests it: oij's
    own join passes, and the toy, which knows no cond, is caught (the negative control)."""
    assert "cond" not in parse_features("all") and "cond" in parse_features("all,cond")
    # oij join in this process (a verdict on its cond; the join as a process: the engines' test above)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("oij.testing._runner.run_command", _join_command_in_process)
        rc, out = conform(capsys, "--no-vectors", "--small-scope", "0", "--features", "all,cond", "--max-examples",
                          "25", "--", *OIJ, "join", "-")
    assert rc == 0 and "joining condition" in out, out
    rc, out = conform(capsys, "--features", "all,cond", "--max-examples", "60", "--", *toy())
    assert rc == 1, out


def test_parallel_cases_with_jobs(capsys: pytest.CaptureFixture[str]) -> None:
    with forked_commands():
        rc, out = conform(capsys, "-j", "2", "--max-examples", "40", "--", *toy("late-le"))
    assert rc == 1 and "behaves like late-le" in out


@pytest.mark.parametrize("profile", ["late-le", "late-silent", "late-joined"])
def test_the_fingerprint_names_the_profile_an_implementation_follows(
        profile: str, capsys: pytest.CaptureFixture[str]) -> None:
    with forked_commands():  # oij join - --profile P forked per case
        rc, out = conform(capsys, "--max-examples", "150", "--timeout", "60", "--", *OIJ, "join", "-", "--profile",
                          profile)
    assert rc == 1, out
    verdict = out.split("semantic fingerprint: ")[1].splitlines()[0]
    assert verdict.startswith("behaves like") and profile in verdict, out


def test_a_bug_is_not_passed_off_as_a_profile(capsys: pytest.CaptureFixture[str]) -> None:
    with forked_commands():
        rc, out = conform(capsys, "--", *toy("no-probe-direction"))
    assert rc == 1 and "no named profile explains" in out


def test_an_implementation_that_follows_a_profile_conforms_to_it(capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("oij.testing._runner.run_command", _toy_in_process)
    rc, out = conform(capsys, "--profile", "late-le", "--max-examples", "60", "--", *toy("late-le"))
    assert rc == 0, out


@pytest.mark.parametrize(
    ("script", "problem"),
    [
        ("print('hello')", "protocol error"),
        ("import sys; sys.exit(3)", "crash: exit code 3"),
        ("import time; time.sleep(30)", "hang"),
        ("print('{\"type\":\"late\",\"id\":1}'); print('{\"type\":\"late\",\"id\":1}')", "protocol error"),
        ("print('{\"type\":\"pair\",\"base\":1}')", "probe: missing"),
    ],
)
def test_faults_of_the_command_are_reported_with_the_case(
        script: str, problem: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = conform(capsys, "--max-examples", "5", "--timeout", "1", "--", sys.executable, "-c", script)
    assert rc == 1
    assert problem in out
    assert "query:" in out  # the timeline of the case that caused it


def test_protocol_errors_quote_the_line() -> None:
    with pytest.raises(ProtocolError, match=r"line 2 is a duplicate: '\{\"type\":\"late\",\"id\":1\}'"):
        parse_output('{"type":"late","id":1}\n{"type":"late","id":1}\n')
    with pytest.raises(ProtocolError, match="unknown field"):
        parse_output('{"type":"late","id":1,"x":2}\n')
    with pytest.raises(ProtocolError, match="not JSON"):
        parse_output("pair 1 2\n")


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conform"]) == 2
    assert main(["conform", "--features", "nonsense", "--", "true"]) == 2
    assert main(["conform", "--profile", "nonsense", "--", "true"]) == 2
    assert "unknown feature" in capsys.readouterr().err


def test_features_restrict_the_cases() -> None:
    feats = parse_features("all,-aggregates,-left,-channels,-lateness")
    assert feats == frozenset(FEATURES) - {"aggregates", "left", "channels", "lateness", "cond"}

    @settings(max_examples=100, database=None)
    @given(cases(feats))
    def check(case: Case) -> None:
        q = case.query
        assert q.aggregate is None and q.join == "inner" and q.channels == 1 and q.lateness is None

    check()


@settings(max_examples=400, deadline=None, database=None)
@given(queries().flatmap(lambda q: event_lists(q).map(lambda es: (q, es))))
def test_the_canonical_profile_equals_the_oracle(qe: tuple[Query, list[Event]]) -> None:
    q, events = qe
    assert compute_profile_result(events, q, CANONICAL) == run_events(events, q).canonical()


@settings(max_examples=200, deadline=None, database=None)
@given(cases())
def test_a_wrong_profile_is_caught_by_the_profile_check(case: Case) -> None:
    # negative control for the comparison: the canonical oracle, judged against late-le, fails where they differ
    a, b = expected_output(case, "canonical"), expected_output(case, "late-le")
    if a != b:
        with pytest.raises(AssertionError):
            assert_conforms(lambda q, ev: run_events(ev, q), case, profile="late-le")
    else:
        assert_conforms(lambda q, ev: run_events(ev, q), case, profile="late-le")


@settings(max_examples=50, deadline=None, database=None)
@given(cases())
def test_assert_conforms_with_a_callable(case: Case) -> None:
    assert_conforms(lambda q, ev: run_events(ev, q), case)


def test_assert_conforms_message_is_the_timeline() -> None:
    case = Case.from_jsonl('{"type":"query","lower":0,"upper":0}\n{"type":"tuple","side":"base","id":1,"ts":3,'
                           '"key":1}\n{"type":"tuple","side":"probe","id":2,"ts":3,"key":1}\n{"type":"end"}\n')
    with pytest.raises(AssertionError) as e:
        assert_conforms(lambda q, ev: Results(), case)
    assert "- pair base=1 probe=2" in str(e.value) and "W after" in str(e.value)


def test_fingerprint_needs_every_observation() -> None:
    case = Case.from_jsonl('{"type":"query","lower":0,"upper":0,"lateness":0}\n{"type":"tuple","side":"base",'
                           '"id":1,"ts":5,"key":1}\n{"type":"tuple","side":"probe","id":2,"ts":5,"key":1}\n'
                           '{"type":"end"}\n')
    got = expected_output(case, "late-le")
    assert [p.name for p in fingerprint([(case, got)], FEATURES).profiles][:1] == ["late-le"]
    assert fingerprint([(case, got), (case, None)], FEATURES).profiles == []


def join_in_process(*args: str) -> Callable[[str], Outcome]:
    """``oij join - ARGS`` run by :func:`oij.cli.main` in this process, the case's text as its stdin: what
    ``oij vectors verify DIR -- oij join - ARGS`` runs as one process per case, without the 372 interpreter
    start-ups (the same parser, reader, oracle and writer; a non-zero exit or an exception is a crash, output
    that is no result lines a protocol error, as :func:`oij.testing._runner.run_command` reports them)."""
    def run(text: str) -> Outcome:
        out, err = io.StringIO(), io.StringIO()
        stdin = io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8")
        old = sys.stdin
        sys.stdin = stdin
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(["join", "-", *args])
        except Exception as e:  # a traceback: what a process would exit 1 with
            return Outcome(None, f"crash: {type(e).__name__}: {e}")
        finally:
            sys.stdin = old
        if rc != 0:
            return Outcome(None, f"crash: exit code {rc}; stderr: {err.getvalue().strip()}", err.getvalue())
        try:
            return Outcome(parse_output(out.getvalue()), None, err.getvalue())
        except ProtocolError as e:
            return Outcome(None, f"protocol error: {e}", err.getvalue())

    return run


def _vector_dir(src: Path, dst: Path, rows: list[str]) -> None:
    """A vector directory holding the manifest lines ``rows`` of ``src`` and their files."""
    for line in rows:
        row = json.loads(line)
        for f in (row["case"] + ".in.jsonl", row["expected"]):
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / f, dst / f)
    (dst / "manifest.jsonl").write_text("\n".join(rows) + "\n")


def test_vectors_are_deterministic_and_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every vector passes ``oij join`` under every profile, judged by ``oij vectors verify``'s own code
    (:func:`oij.testing._verify.verify_vectors`) with the join run in this process (:func:`join_in_process`); the
    command itself, a process per case, on a sample of the vectors (the first of every feature and every
    eighth; every sixteenth by default, ``OIJ_TESTS=full`` every eighth) and on one profile of its flag (the
    in-process runs take every profile's flag).  Negative controls: the toy with an upper-bound bug fails the
    upper-edge vectors, and the in-process join under the wrong profile fails the sample's canonical vectors."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["vectors", "export", str(a)]) == 0
    assert main(["vectors", "export", str(b)]) == 0
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert len(files) > 400 and files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    manifest = (a / "manifest.jsonl").read_text().splitlines()
    capsys.readouterr()
    for p in PROFILES:
        n = sum(json.loads(line)["profile"] == p for line in manifest)
        args = () if p == "canonical" else ("--profile", p)  # the default, and the flag
        rep = verify_vectors(str(a), join_in_process(*args), profile=p)
        out = rep.text
        assert rep.failed == 0, (p, out)
        assert re.search(rf"^{n} passed, 0 failed$", out, re.M) and n >= (300 if p == "canonical" else 1), (p, out)
    # the command, a process per case: the first vector of every feature and every eighth (sixteenth)
    canonical = [line for line in manifest if json.loads(line)["profile"] == "canonical"]
    first = {json.loads(line)["feature"]: line for line in reversed(canonical)}
    step = examples(16, 8)
    sample = [line for i, line in enumerate(canonical) if i % step == 0 or line in first.values()]
    assert len(canonical) // step <= len(sample) <= 80 and len(first) >= 10
    _vector_dir(a, tmp_path / "sample", sample)
    # the negative control of the in-process judging: late-le's outputs are not the canonical ones
    rep = verify_vectors(str(tmp_path / "sample"), join_in_process("--profile", "late-le"))
    assert rep.failed > 0 and re.search(r"^\d+ passed, [1-9]\d* failed$", rep.text, re.M)
    r = subprocess.run([*OIJ, "vectors", "verify", str(tmp_path / "sample"), "-j", "2", "--", *OIJ, "join", "-"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(rf"^{len(sample)} passed, 0 failed$", r.stdout, re.M), r.stdout
    r = subprocess.run([*OIJ, "vectors", "verify", str(a), "-j", "2", "--profile", "spark-ss", "--", *OIJ, "join",
                        "-", "--profile", "spark-ss"], capture_output=True, text=True)
    n = sum(json.loads(line)["profile"] == "spark-ss" for line in manifest)
    assert r.returncode == 0 and re.search(rf"^{n} passed, 0 failed$", r.stdout, re.M), r.stdout + r.stderr
    # the negative control, on the vectors of the upper edge (the toy's bug is there): a manifest of those rows
    rows = [line for line in manifest if '"feature":"bounds"' in line and "_upper" in json.loads(line)["case"]]
    assert len(rows) >= 32
    _vector_dir(a, tmp_path / "upper", rows)
    r = subprocess.run([*OIJ, "vectors", "verify", str(tmp_path / "upper"), "--", *toy("upper-off-by-one")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "FAIL bounds/" in r.stdout


def test_the_schemas_accept_what_oij_writes(tmp_path: Path) -> None:
    from oij.testing._schema import validate_line

    rows = parse_output("".join(
        f'{{"type":"aggregate","base":{i},"count":1,"value":{v}}}\n' for i, v in enumerate(["null", "1.5", '"inf"'])))
    assert len(rows.aggregates) == 3
    assert validate_line({"type": "tuple", "side": "base", "id": 1, "ts": 2, "key": True}) != []
    assert validate_line({"type": "query", "lower": 0, "upper": 1, "aggregate": None}) == []


def test_search_returns_observations_for_the_fingerprint() -> None:
    r = search(toy("late-le"), max_examples=100)
    assert r.failure is not None and len(r.observations) >= r.examples >= 2


def test_flink_sql_storing_rule_separates_it_from_late_joined() -> None:
    # The two cases docs/findings.rst gives for Flink SQL's storing rule, on the profiles alone (no Flink).
    def t(side: str, i: int, ts: int, key: int = 1) -> StreamTuple:
        return StreamTuple(cast(Side, side), i, ts, key, 1.0)

    late_stays = Case(Query(-5, 5, lateness=0), (t("base", 1, 10), t("probe", 2, 30, 9), t("probe", 3, 9),
                                                  t("base", 4, 12), End()))
    assert expected_output(late_stays, "flink-sql").pairs == [(1, 3), (4, 3)]
    assert expected_output(late_stays, "late-joined").pairs == []  # W = 30: nothing probes, nothing stays
    at_edge = Case(Query(0, 0, lateness=0), (t("base", 1, 10, 2), t("probe", 2, 10, 2), t("probe", 3, 10),
                                              t("base", 4, 10), End()))
    assert expected_output(at_edge, "flink-sql").pairs == [(1, 2)]
    assert expected_output(at_edge, "canonical").pairs == [(1, 2), (4, 3)]
