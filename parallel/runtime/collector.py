"""Collectors: the component in front of each replica that turns its input rings into one delivery order.

Data flow (one collector per replica, inside the replica process)::

    input ring of channel 0 --get--> deque[0] --\\
    input ring of channel 1 --get--> deque[1] ----> policy --> deliveries (channel, Batch), in order
    ...                                          /
    input ring of channel C-1 ---> deque[C-1] --/

Channels are the emitters (M base emitters, then M probe emitters).  The
collector drains every ring eagerly into a local deque (so a producer never
waits on the *order* of delivery, only on the replica's speed) and the
policy decides what to deliver:

* :class:`StandardCollector` (KP-OIJ, PPOIJ §4.1): whatever arrived, one
  batch per channel in turn (fair multiplexing); no ordering guarantee
  across channels.
* :class:`RoundRobinCollector` (DP-OIJ §4.2, HP-OIJ §4.3): channels take
  turns in a fixed circular order that alternates base and probe emitters
  (``b0, p0, b1, p1, ...``); the emitters cut the stream into *epochs* and a
  channel's turn delivers its batches of the current epoch up to its CLOSE
  punctuation for that epoch; batches that arrive off-turn wait in their
  deque.  Every replica therefore delivers any two batches it shares with
  another replica in the same relative order (:mod:`oij.spec.ordering`).
* :class:`NaiveCollector` (negative control): standard multiplexing as in
  KP, with a seeded per-replica random preference among the non-empty
  channels, the schedule PPOIJ Examples 4.1-4.3 warn about.
* :class:`FixedRoundRobinCollector` (negative control): channels take turns
  one batch at a time in the fixed circular order, without epochs: correct
  for DP's full broadcast but not for HP's partial multicast (PPOIJ Example
  4.3); the model checker (:mod:`oij.proofs.model`) finds the counterexample.

Creates no process and no shared memory: the rings are attached by the
replica (:mod:`oij.parallel.runtime.replica`) and owned by the driver.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass

from oij.parallel.runtime.ring import KIND_CLOSE, KIND_DATA, KIND_END, Batch, Ring


@dataclass
class Input:
    """One input channel of a replica: a ring and this replica's reader index in it."""

    chan: int
    ring: Ring
    reader: int


class Collector(ABC):
    """Base class: eager draining into per-channel deques."""

    def __init__(self, inputs: list[Input]) -> None:
        self.inputs = inputs
        self.queues: list[deque[Batch]] = [deque() for _ in inputs]
        self.ended = [False] * len(inputs)
        self.buffered_max = 0

    def pull(self) -> int:
        """Move every available batch of every ring into its deque; the number moved."""
        moved = 0
        for i, inp in enumerate(self.inputs):
            q = self.queues[i]
            while True:
                b = inp.ring.get(inp.reader)
                if b is None:
                    break
                q.append(b)
                moved += 1
        return moved

    @abstractmethod
    def deliver(self) -> list[tuple[int, Batch]]:
        """The batches the policy releases now, as (input index, batch); each subclass is one policy."""

    def poll(self) -> list[tuple[int, Batch]]:
        """Pull what arrived, then the deliveries the policy allows now (possibly none)."""
        self.pull()
        out = self.deliver()
        held = sum(len(q) for q in self.queues)
        self.buffered_max = max(self.buffered_max, held)
        return out

    def _mark(self, i: int, b: Batch) -> None:
        if b.kind == KIND_END:
            self.ended[i] = True

    def finished(self) -> bool:
        return all(self.ended)


class StandardCollector(Collector):
    """KP-OIJ: deliver everything in the order it was pulled, channel by channel."""

    def deliver(self) -> list[tuple[int, Batch]]:
        # fair multiplexing: one batch per non-empty channel in turn, so that no channel runs far ahead of
        # the others (a channel that runs ahead holds the minimum watermark back and the state grows)
        out: list[tuple[int, Batch]] = []
        live = [i for i, q in enumerate(self.queues) if q]
        while live:
            nxt = []
            for i in live:
                q = self.queues[i]
                b = q.popleft()
                self._mark(i, b)
                out.append((i, b))
                if q:
                    nxt.append(i)
            live = nxt
        return out


class RoundRobinCollector(Collector):
    """DP/HP-OIJ: epoch-wise round robin over the channels in the order ``order`` (module docstring)."""

    def __init__(self, inputs: list[Input], order: list[int]) -> None:
        super().__init__(inputs)
        self.order = order  # channel indices (into inputs), alternating base/probe
        self.epoch = 0
        self.turn = 0

    def _next_turn(self) -> None:
        self.turn += 1
        if self.turn == len(self.order):
            self.turn = 0
            self.epoch += 1

    def deliver(self) -> list[tuple[int, Batch]]:
        out: list[tuple[int, Batch]] = []
        while not self.finished():
            i = self.order[self.turn]
            if self.ended[i]:
                self._next_turn()
                continue
            q = self.queues[i]
            if not q:
                break  # wait for this channel's turn to be completed
            b = q[0]
            if b.kind == KIND_DATA and b.epoch == self.epoch:
                out.append((i, q.popleft()))
            elif b.kind == KIND_CLOSE and b.epoch == self.epoch:
                out.append((i, q.popleft()))
                self._next_turn()
            elif b.kind == KIND_END:
                q.popleft()
                self._mark(i, b)
                out.append((i, b))
                self._next_turn()
            elif b.epoch > self.epoch:
                self._next_turn()  # implicit close: the channel has moved on
            else:
                raise RuntimeError(f"channel {i} sent epoch {b.epoch} after the collector reached epoch {self.epoch}")
        return out


class NaiveCollector(Collector):
    """Negative control: multiplex channels in a seeded random order, ignoring epochs."""

    def __init__(self, inputs: list[Input], seed: int) -> None:
        super().__init__(inputs)
        self.rng = random.Random(seed)

    def deliver(self) -> list[tuple[int, Batch]]:
        out: list[tuple[int, Batch]] = []
        idx = [i for i, q in enumerate(self.queues) if q]
        self.rng.shuffle(idx)
        for i in idx:
            q = self.queues[i]
            while q:
                b = q.popleft()
                self._mark(i, b)
                out.append((i, b))
        return out


class FixedRoundRobinCollector(Collector):
    """Negative control: one batch per channel in the fixed circular ``order``, ignoring epochs (Example 4.3)."""

    def __init__(self, inputs: list[Input], order: list[int]) -> None:
        super().__init__(inputs)
        self.order = order
        self.turn = 0

    def deliver(self) -> list[tuple[int, Batch]]:
        out: list[tuple[int, Batch]] = []
        while not self.finished():
            i = self.order[self.turn]
            if self.ended[i]:
                self.turn = (self.turn + 1) % len(self.order)
                continue
            q = self.queues[i]
            if not q:
                break  # wait for the channel whose turn it is
            b = q.popleft()
            self._mark(i, b)
            out.append((i, b))
            self.turn = (self.turn + 1) % len(self.order)
        return out
