"""Every ``oij bench`` experiment runs with ``--quick`` (a smoke test: no time is asserted), writes its raw
numbers, and ``oij bench plot`` redraws them; the counted figures hold what the engines must agree on."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import multiprocessing
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest

from oij.bench import experiment as bench_experiment
from oij.bench.experiment import Cell, experiments
from oij.bench.tools import PLANTS, QUICK_PLANTS, plant
from oij.cli import main
from tests import jvm_archive

pytestmark = pytest.mark.timeout(600)

ON_SPARK = "spark"
"""The experiment that runs Spark: each of its cells is a whole ``oij check`` process on Spark (a JVM of its own), so
it needs no session of the worker's and stays out of the ``spark-session`` group (the suite's longest chain): it
runs beside it, on any worker; the others run in the ``bench-quick`` group."""


SMALLER = {"ppoij-keys": ("events", 3000, 1000), "cond": ("tuples", 4000, 1000), "generate": ("events", 20_000, 2000)}
"""The quick cells whose size the tests lower (experiment: the cell's key, its quick value, the tests' value), each
the same cells otherwise.  What the tests check of them holds at any size: KP, DP and HP give the same pairs and
comparisons >= pairs in each cell (ppoij-keys), and every experiment writes its rows.  At the quick size they cost
most of the quick runs' CPU: ppoij-keys 7.5 CPU-seconds (one key and a 10 s window join every tuple with every
other: 3,000 events are millions of pairs, each sorted by a Python key), cond 6 (the oracle over 4,000 tuples with
about 1,000 candidates each, four times), generate 2.2 (four ``oij generate`` processes of 20,000 events); at a
ninth to a tenth of the size, a fraction of that."""


def _smaller(e: bench_experiment.Experiment) -> bench_experiment.Experiment:
    key, quick, small = SMALLER[e.name]
    real: Callable[[str], list[Cell]] = e.cells

    def cells(size: str) -> list[Cell]:
        got = real(size)
        assert size != "quick" or all(c[key] == quick for c in got), (e.name, got)  # the size this replaces
        return [{**c, key: small} if size == "quick" else c for c in got]

    return dataclasses.replace(e, cells=cells)


SPARK_TUPLES = (20_000, 4_000)
"""The quick size of ``oij bench spark``'s cells (its plain cell's ``tuples`` and its planted cell's
``planted_tuples``) and the tests' size.  What the tests check of them holds at any size (Spark's check agrees with
``oij join``'s output, every row counted; the planted difference is found alone past the middle of the output,
about 2,000 pairs at the tests' size, and listed with its replay case), and no step of the check is left out at
the smaller size.  At the quick size, ``oij join``, its sort and the oracle's scans in Spark's Python workers run
over five times the tuples."""


def _spark_smaller(e: bench_experiment.Experiment) -> bench_experiment.Experiment:
    quick, small = SPARK_TUPLES
    real: Callable[[str], list[Cell]] = e.cells

    def cells(size: str) -> list[Cell]:
        got = real(size)
        if size != "quick":
            return got
        keys = [k for c in got for k in ("tuples", "planted_tuples") if k in c]
        assert keys and all(c[k] == quick for c in got for k in keys if k in c), got  # the size this replaces
        return [{k: small if k in ("tuples", "planted_tuples") else v for k, v in c.items()} for c in got]

    return dataclasses.replace(e, cells=cells)


def _one_pool(mp: pytest.MonkeyPatch) -> bench_experiment.Context:
    """One pool of replicas for every experiment's quick run: each run's :class:`oij.bench.experiment.Context`
    asks the returned context for its runtime (``Context.runtime``, unchanged, on that context: reused while it
    has enough replicas, replaced by a larger one else), so that its own ``close`` leaves the pool running; every
    experiment started two replica processes of its own (about 0.15 CPU-seconds each to start).  The caller
    closes the returned context."""
    shared = bench_experiment.Context("quick")
    real = bench_experiment.Context.runtime

    def runtime(self: bench_experiment.Context, replicas: int) -> Any:
        del self
        return real(shared, replicas)

    mp.setattr(bench_experiment.Context, "runtime", runtime)
    return shared


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every experiment's quick run but Spark's (:func:`spark_results`), :data:`SMALLER`'s at the tests' size, all
    on one pool of replicas (:func:`_one_pool`): built once, on one worker (the ``bench-quick`` group of
    tests/conftest.py)."""
    d = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as mp:
        for name in SMALLER:
            mp.setitem(bench_experiment.EXPERIMENTS, name, _smaller(experiments()[name]))
        pool = _one_pool(mp)
        try:
            for name in experiments():
                if name != ON_SPARK:
                    assert main(["bench", name, "--quick", "--out", str(d), "--no-progress"]) == 0, name
            assert pool.replicas == 2, pool.replicas  # the quick runs' replicas: one pool served them all
        finally:
            pool.close()
    assert main(["bench", "oracle", "--quick", "--out", str(d)]) == 0
    assert main(["bench", "memory", "--quick", "--out", str(d)]) == 0
    return d


SHIM = """#!{python} -IS
import os, sys
from multiprocessing.connection import Client
argv = sys.argv[1:]
if argv[:3] != ["-m", "oij.cli", "check"]:
    os.execv({python!r}, [{python!r}, *argv])
with Client({address!r}, authkey=bytes.fromhex({key!r})) as c:
    c.send(argv[2:])
    sys.exit(c.recv())
"""
"""The ``sys.executable`` of the runs on :func:`check_helper`: ``python -m oij.cli check ...`` is sent to the helper
(:func:`_serve`) and exits with its status; any other command is the interpreter's own."""


def _serve(address: str, key: bytes) -> int:
    """The helper process: runs each ``oij check`` argument list it is sent with :func:`oij.cli.main`, in turn, and
    answers its exit status (one Spark session, one JVM, for all of them); ``"ran"`` answers how many ran so far;
    None stops it.  Returns how many ran."""
    from multiprocessing.connection import Listener

    ran = 0
    with Listener(address, authkey=key) as server:
        while True:
            with server.accept() as c:
                argv = c.recv()
                if argv is None:
                    return ran
                if argv == "ran":
                    c.send(ran)
                    continue
                try:
                    rc = main(argv)
                except SystemExit as e:  # argparse's exit: the status a process would have exited with
                    rc = e.code if isinstance(e.code, int) else 1
                c.send(rc)
                ran += 1


@dataclasses.dataclass(frozen=True)
class Helper:
    """:func:`check_helper`'s process: :data:`SHIM` (as ``sys.executable``) hands it ``oij check``."""

    shim: Path
    address: str
    key: bytes

    def send(self, message: object) -> Any:
        from multiprocessing.connection import Client

        with Client(self.address, authkey=self.key) as c:
            c.send(message)
            return None if message is None else c.recv()

    def ran(self) -> int:
        """How many ``oij check`` runs the helper has run."""
        n: int = self.send("ran")
        return n

    @contextlib.contextmanager
    def as_python(self) -> Iterator[None]:
        """``sys.executable`` is :data:`SHIM` within: the ``oij check`` processes a run starts go to the helper."""
        import sys

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(sys, "executable", str(self.shim))
            yield


BENCH_SPARK = pytest.mark.xdist_group("bench-spark-helper")
"""The tests on :func:`check_helper` (module-scoped) on one worker, so that one helper (one JVM) serves them."""


@pytest.fixture(scope="module")
def check_helper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helper]:
    """One helper process that runs the ``oij check`` runs on Spark of this module's runs, one after the other: one
    JVM for all of them, as the runs' own ``oij check`` processes would each start one (measured: 21.7
    CPU-seconds for the two of ``oij bench spark --quick`` in one process, 28.6 as two processes).  The runs start
    their commands as ``sys.executable -m oij.cli ...``; within :meth:`Helper.as_python`, ``sys.executable`` is
    :data:`SHIM`, which hands ``oij check`` to the helper and runs anything else as it is.  A process of its own,
    not this one: no Spark session in the worker, so the tests stay out of the ``spark-session`` group
    (tests/conftest.py).  The commands, their arguments and their reports are the runs' own; only the process
    each check runs in is shared (the wall time a run records then leaves out a JVM start, and the process its
    CPU seconds and peak RSS are read from is the shim: nothing here asserts more of them than that they were
    read).  The session is the first check's: every check here asks for ``local[2]``."""
    import os
    import sys

    d = tmp_path_factory.mktemp("check-helper")
    address, key = str(d / "helper.sock"), os.urandom(16)
    shim = d / "python"
    shim.write_text(SHIM.format(python=sys.executable, address=address, key=key.hex()))
    shim.chmod(0o755)
    jvm_archive.use_when_ready(__file__)  # the helper's JVM maps the class archive, as the runs' would
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        helper = pool.submit(_serve, address, key)
        deadline = time.monotonic() + 120
        while not os.path.exists(address) and not helper.done() and time.monotonic() < deadline:
            time.sleep(0.05)
        h = Helper(shim, address, key)
        try:
            if helper.done():
                helper.result()  # its error
            assert os.path.exists(address), "the check helper did not start listening"
            yield h
        finally:
            if not helper.done():
                h.send(None)
            helper.result()


@pytest.fixture(scope="module")
def spark_results(tmp_path_factory: pytest.TempPathFactory, check_helper: Helper) -> Path:
    """The Spark experiment's quick run at :data:`SPARK_TUPLES`' size, its two ``oij check`` runs on Spark (the plain
    cell's and the planted cell's) on :func:`check_helper`, one after the other."""
    d = tmp_path_factory.mktemp("bench-spark")
    before = check_helper.ran()
    with check_helper.as_python(), pytest.MonkeyPatch.context() as mp:
        mp.setitem(bench_experiment.EXPERIMENTS, ON_SPARK, _spark_smaller(experiments()[ON_SPARK]))
        assert main(["bench", ON_SPARK, "--quick", "--out", str(d), "--no-progress"]) == 0
    # the plain cell and each planted one: every check ran in the helper
    assert check_helper.ran() - before == 1 + len(QUICK_PLANTS)
    return d


def _rows(d: Path, name: str) -> list[dict[str, object]]:
    data = json.loads((d / f"{name}.json").read_text())
    assert data["experiment"] == name and data["size"] == "quick" and data["machine"]["cores"]
    rows: list[dict[str, object]] = data["rows"]
    return rows


def _rows_and_csv(d: Path, name: str) -> list[dict[str, object]]:
    rows = _rows(d, name)
    assert rows, name
    with open(d / f"{name}.csv") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    return rows


def test_every_experiment_writes_rows_json_and_csv(quick_results: Path) -> None:
    """(Spark's experiment: :func:`test_the_spark_scale_rows_judge_the_same_output`.)"""
    for name in experiments():
        if name != ON_SPARK:
            _rows_and_csv(quick_results, name)
    assert json.loads((quick_results / "oracle.json").read_text())["operator_alone"]
    assert (quick_results / "memory.json").exists()


def test_the_patterns_agree_in_every_cell(quick_results: Path) -> None:
    """KP, DP and HP run the same stream in each cell of the PPOIJ experiments: same pairs, same total work
    (every pair is found once, by one comparison); Key-OIJ and Scale-OIJ give the same rows."""
    for name in ("ppoij-keys", "ppoij-split", "ppoij-replicas", "ppoij-batch", "ppoij-latency"):
        by_cell: dict[tuple[object, ...], set[object]] = defaultdict(set)
        for r in _rows(quick_results, name):
            key = tuple((k, v) for k, v in sorted(r.items()) if k in ("dist", "keys", "interval_s", "replicas",
                                                                       "events", "batch"))
            by_cell[key].add(r["pairs"])
            assert int(str(r["comparisons"])) >= int(str(r["pairs"]))
            assert float(str(r["load_balance_factor"])) >= 1.0
        assert all(len(v) == 1 for v in by_cell.values()), (name, by_cell)
        assert any(v != {0} for v in by_cell.values()), name  # some cell joined something
    for name in ("scale-lateness", "scale-keys", "scale-window", "scale-rotating"):
        out: dict[tuple[object, ...], set[object]] = defaultdict(set)
        for r in _rows(quick_results, name):
            out[tuple(sorted((k, json.dumps(v)) for k, v in r.items() if k in ("over", "events", "preset")))].add(
                r["rows_out"])
        assert all(len(v) == 1 for v in out.values()), (name, out)


def test_a_disagreeing_cell_would_be_seen(quick_results: Path) -> None:
    """Negative control for the check above: one cell's pairs changed are caught."""
    rows = _rows(quick_results, "ppoij-keys")
    rows[0]["pairs"] = int(str(rows[0]["pairs"])) + 1
    cells: dict[tuple[object, ...], set[object]] = defaultdict(set)
    for r in rows:
        cells[(r["dist"], r["keys"], r["interval_s"])].add(r["pairs"])
    assert any(len(v) > 1 for v in cells.values())


def test_counted_trends_of_the_papers(quick_results: Path) -> None:
    """A machine-independent shape the quick sizes already show: DP stores every tuple once, round robin, so its
    load balance is perfect (PPOIJ Fig. 12).  (Key-OIJ's effectiveness against lateness needs streams longer
    than the lateness; tests/parallel/test_scale.py checks it on the state itself.)"""
    split = _rows(quick_results, "ppoij-split")
    assert all(float(str(r["load_balance_factor"])) <= 1.05 for r in split if r["pattern"] == "dp")
    assert any(float(str(r["load_balance_factor"])) > 1.05 for r in split if r["pattern"] == "kp")


def test_plot_redraws_png_and_svg(quick_results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "plot", str(quick_results), "--to", str(tmp_path)]) == 0
    for name, e in experiments().items():
        if e.plot is not None and name != ON_SPARK:
            assert (tmp_path / f"{name}.png").stat().st_size > 1000
            assert (tmp_path / f"{name}.svg").read_text().lstrip().startswith("<?xml")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["bench", "plot", str(empty)]) == 2
    assert "no experiment results" in capsys.readouterr().err


@pytest.mark.spark
@BENCH_SPARK
def test_the_spark_scale_rows_judge_the_same_output(spark_results: Path, tmp_path: Path) -> None:
    """``oij bench spark``: Spark's check agrees with oij join's output, read by Spark itself, every row counted
    (the pairs of the one-machine run), and its report breaks the time down into Spark's steps; its plot is
    drawn.  The planted cells find their one difference and list its replay case (the plain cells, which
    agree, are their negative control; :func:`test_a_plant_changes_one_row` checks the planting)."""
    assert main(["bench", "plot", str(spark_results), "--to", str(tmp_path)]) == 0
    assert (tmp_path / f"{ON_SPARK}.png").stat().st_size > 1000
    rows = _rows_and_csv(spark_results, ON_SPARK)
    planted = [r for r in rows if "plant" in r]
    # each difference planted into a copy of the output is found alone and given its replay case
    assert sorted(str(r["plant"]) for r in planted) == sorted(QUICK_PLANTS)
    for r in planted:
        assert r["agrees"] is False and r["found"] is True and r["replay_listed"] is True, r
    for r in rows:
        if "plant" in r:
            continue
        assert r["agrees"] is True and r["one_machine_same"] is True
        assert r["got_read_by"] == "spark" and r["got_rows"] == r["pairs"]
        steps = {str(s["step"]) for s in cast(list[dict[str, object]], r["steps"])}
        assert "loading --got me" in steps  # "comparison" runs no job when the fingerprints agree
        assert steps & {"arrival watermarks and late marking", "validating events, watermarks and late marking"}


@pytest.mark.spark
@BENCH_SPARK
def test_the_spark_cost_hook_records_a_whole_check_process(check_helper: Helper, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``oij bench schedule --spark-tuples N`` (:func:`oij.bench.schedule.spark_judge_cost`): at a tiny size, the
    judge on Spark runs as one ``oij check`` process and its time, memory and verdict are recorded (the process is
    :data:`SHIM`, which waits for the check on :func:`check_helper`'s session: the verdict and exit status are the
    check's own); negative control: the same hook on an input that is not there records the failure (exit 2, no
    verdict).  (Its flags: tests/bench/test_schedule_spark_cost.py.)"""
    import os

    from oij.bench import schedule as bs

    before = check_helper.ran()
    with check_helper.as_python():
        got = bs.spark_judge_cost(str(tmp_path), 400, seed=2, master="local[2]")
    assert got["exit"] == 0 and got["ran_on"] == "spark" and got["admissible"] is True, got
    assert got["stats"]["tuples"] == 400 and got["wall_s"] > 0 and got["cpu_s"] > 0 and got["peak_rss_bytes"] > 0
    assert "--seq-limit 0 --master local[2]" in got["command"]
    text = bs.format_table({"rows": [], "spark_cost": got})
    assert "the judge on Spark (local[2]) at 400 tuples" in text and "admissible" in text
    # negative control: the check process fails (its events are gone), and the hook says so
    orig = bs.timed_rss

    def gone(cmd: list[str]) -> tuple[float, float, int, int]:
        os.remove(cmd[4])  # the events file the check would read
        return orig(cmd)

    monkeypatch.setattr(bs, "timed_rss", gone)
    (tmp_path / "b").mkdir()
    with check_helper.as_python():
        bad = bs.spark_judge_cost(str(tmp_path / "b"), 50, seed=2, master="local[2]")
    assert bad["exit"] == 2 and bad["admissible"] is None, bad
    assert check_helper.ran() - before == 2  # both checks ran on the helper, not in a process of their own


def test_a_plant_changes_one_row(tmp_path: Path) -> None:
    """Each plant of ``oij bench spark`` changes exactly the row it reports, past the file's middle: one pair
    fewer or one more, one more late id (a joined base, so not late already), one aggregate value off by 2e-9
    relative; every other line stays, in order."""
    from collections import Counter

    from oij.spec.batch import Results

    from oij.io.jsonlwrite import result_lines

    pairs: list[tuple[int, int | None]] = [(i, i + 1) for i in range(40)]
    res = Results(pairs=pairs, aggregates=[], late=[1000, 1001])
    src = tmp_path / "src.jsonl"
    src.write_text("".join(result_lines(res)))
    agg_src = tmp_path / "agg.jsonl"
    agg_src.write_text("".join(result_lines(Results(pairs=[], aggregates=[(i, 2, 1.5 * i) for i in range(40)],
                                                    late=[]))))

    def rows(p: Path) -> Counter[str]:
        return Counter(json.dumps(json.loads(x), sort_keys=True) for x in p.read_text().splitlines())

    for how in PLANTS:
        base = agg_src if how == "wrong-aggregate" else src
        dst = tmp_path / f"{how}.jsonl"
        want = plant(str(base), str(dst), how)
        before, after = rows(base), rows(dst)
        gone, new = before - after, after - before
        if how == "missing-pair":
            assert not new and [json.loads(k) for k in gone] == [{"type": "pair", "base": want["base"],
                                                                  "probe": want["probe"]}]
        elif how == "duplicate-pair":
            assert not gone and [json.loads(k) for k in new] == [{"type": "pair", "base": want["base"],
                                                                 "probe": want["probe"]}]
            assert new[next(iter(new))] == 1 and before[next(iter(new))] == 1
        elif how == "extra-late":
            assert not gone and [json.loads(k) for k in new] == [{"type": "late", "id": want["id"]}]
            assert want["id"] in {a for a, _ in pairs} and want["id"] not in res.late
        else:
            (old,), (bent,) = [json.loads(k) for k in gone], [json.loads(k) for k in new]
            assert old["base"] == bent["base"] == want["base"] and old["value"]
            assert abs(bent["value"] - old["value"]) > 1e-9 * max(abs(bent["value"]), abs(old["value"]))
        if how != "extra-late":
            assert want["base"] >= 20  # past the middle


def test_a_failing_measured_command_is_one_line_and_leaves_the_old_result(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``oij bench memory`` whose measured ``oij run`` fails (no replica): exit 1, one line naming the command, its
    status and its own error, and the result file as it was (not the rows measured before the failure)."""
    out = tmp_path / "memory.json"
    out.write_text("old\n")
    assert main(["bench", "memory", "--quick", "--replicas", "0", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("oij: error: a measured command failed, nothing written: ")
    assert "--replicas 0" in err[-1] and "exited with status 2: " in err[-1] and "replicas" in err[-1].split(": ")[-1]
    assert out.read_text() == "old\n"
