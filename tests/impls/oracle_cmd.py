"""``reference/oracle.py`` run as a command of the conformance protocol (stdin: one case; stdout: result lines).

The mutation benchmark (``oij bench kit-power``) runs ``oij conform`` on
``python oracle_cmd.py --prefer DIR`` with a mutated copy of ``reference/`` in
DIR/oij/reference: this process imports the mutant (DIR/oij goes first on ``oij``'s path) while
the kit, in its own process, judges with the real one.  It
reads with the standard library and imports nothing but ``spec`` and
``reference`` (a start-up of about 0.1 s: the kit runs it once per case).
With ``OIJ_STATE_BOUND=1`` (``oij conform --state-bound``) it streams the case
and writes state lines (:func:`main_streaming`), so that mutants that keep
state without bound are told apart.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

if sys.argv[1:2] == ["--prefer"]:  # before the imports below: the oracle under test comes from DIR
    import oij  # DIR holds oij/reference/ (laid out as installed), not oij itself: searched first within oij
    oij.__path__.insert(0, f"{sys.argv[2]}/oij")

from oij.reference.oracle import run_events
from oij.spec.model import Comparison, End, Event, Query, StreamTuple, Watermark


def read_case(lines: list[str]) -> tuple[Query, list[Event]]:
    """The query and the events of one oij-jsonl case (trusted input: the kit wrote it)."""
    objs = [json.loads(x) for x in lines if x.strip()]
    h = objs[0]
    q = Query(h["lower"], h["upper"], h.get("lower_inclusive", True), h.get("upper_inclusive", True),
              h.get("aggregate"), h.get("join", "inner"), h.get("channels", 1), h.get("lateness"),
              tuple(Comparison(c["a"], c["op"], c["b"], float(c.get("add", 0.0))) for c in h.get("cond", ())))
    return q, [event_of(o) for o in objs[1:]]


def event_of(o: dict[str, Any]) -> Event:
    """One event line, parsed."""
    if o["type"] == "tuple":
        fields = tuple((k, float(v)) for k, v in o.get("fields", {}).items())
        return StreamTuple(o["side"], o["id"], o["ts"], o["key"], float(o.get("value", 0.0)), o.get("channel", 0),
                           fields)
    if o["type"] == "watermark":
        return Watermark(o["ts"], o.get("channel", 0))
    return End()


def value_text(v: Any) -> str:
    """An aggregate value as the protocol writes it."""
    if v is None:
        return "null"
    if isinstance(v, float) and math.isinf(v):
        return '"inf"' if v > 0 else '"-inf"'
    return json.dumps(v)


def main_streaming() -> None:
    """``OIJ_STATE_BOUND=1`` (``oij conform --state-bound``): the case read line by line, the oracle fed one event
    at a time, and a state line ``{"type":"state","events":K,"stored":N}`` on stderr every 1000 events."""
    from oij.reference.oracle import Oracle

    q, _ = read_case([sys.stdin.readline()])
    o = Oracle(q)
    k = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        o.on_event(event_of(json.loads(line)))
        k += 1
        if k % 1000 == 0:
            sys.stderr.write(f'{{"type":"state","events":{k},"stored":{o.stored}}}\n')
    write_results(o.results())


def write_results(res: Any) -> None:
    """The result lines of ``res`` on stdout."""
    out = [json.dumps({"type": "pair", "base": b, "probe": p}) for b, p in res.pairs]
    out += [f'{{"type": "aggregate", "base": {b}, "count": {n}, "value": {value_text(v)}}}' for b, n, v in
            res.aggregates]
    out += [json.dumps({"type": "late", "id": i}) for i in res.late]
    sys.stdout.write("".join(x + "\n" for x in out))


def main() -> None:
    q, events = read_case(sys.stdin.readlines())
    write_results(run_events(events, q))


if __name__ == "__main__":
    import os

    main_streaming() if os.environ.get("OIJ_STATE_BOUND") == "1" else main()
