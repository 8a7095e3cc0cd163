r"""Collector ordering rules of the shared-nothing parallel patterns, as predicates over replica traces.

A run with replicas :math:`R` is described by, for every replica r,

* its *delivery order* :math:`\sigma_r`: the sequence of tuple ids the
  replica processed, in the order it processed them (no repeats);
* its *stored set* :math:`S_r \subseteq \sigma_r`: the ids it stored in its
  state buffers.

Write :math:`x <_r y` when x comes before y in :math:`\sigma_r`.  A replica
joins a delivered tuple y with its stored opposite-side tuples x of the same
key with :math:`x <_r y`.  So the pair of a base a and a probe b of the same
key is produced once per replica in

.. math::

   D(a, b) = \{ r \mid (a \in S_r \land b \in \sigma_r \land a <_r b)
                \lor (b \in S_r \land a \in \sigma_r \land b <_r a) \}

and the run emits each pair exactly once iff :math:`|D(a,b)| = 1` for every
such a, b (:func:`pairs_decided_once`).  PPOIJ's collector rules are
sufficient conditions for it:

* **DP-OIJ** (§4.2, :func:`dp_rule`): every replica sees every tuple, in one
  common order (:math:`\sigma_r = \sigma_s` for all r, s), and each tuple is
  stored exactly once.  Then for a, b let r be the replica storing the
  earlier of the two in the common order: :math:`D(a,b) = \{r\}`.
* **HP-OIJ** (§4.3, :func:`hp_rule`): the same *per key*: the replicas
  that receive tuples of key k agree on the order of the k-tuples they
  have in common (:func:`common_order`), each tuple is stored exactly once,
  and every tuple of the key delivered *after* a tuple stored at r (anywhere)
  is also delivered to r (coverage).  With coverage and agreement, for a, b with
  (say) a first, the replica storing a receives b after a, and a replica s
  storing b receives a only before b would contradict agreement, so again
  :math:`|D(a,b)| = 1`.
* **KP-OIJ** needs no ordering: a key's tuples all go to one replica, which
  stores all of them, so :math:`D(a,b)` is that replica whatever its order.

Example 4.1 of PPOIJ (duplicates) is :math:`|D| = 2`: R0 stores a and sees
b after it, R1 stores b and sees a after it.  Example 4.2 (missing) is
:math:`|D| = 0`.  These predicates are checked on the traces the parallel
engines record (``trace=True``) in the tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

Order = Sequence[int]


def positions(order: Order) -> dict[int, int]:
    """Position of every id in a delivery order (an id delivered twice is a violation: ValueError)."""
    pos: dict[int, int] = {}
    for i, x in enumerate(order):
        if x in pos:
            raise ValueError(f"tuple {x} delivered twice to one replica")
        pos[x] = i
    return pos


def common_order(orders: Mapping[int, Order]) -> bool:
    r"""True iff every two replicas order their common tuples the same way.

    :math:`\forall r, s\ \forall x, y \in \sigma_r \cap \sigma_s:\ x <_r y \iff x <_s y`,
    i.e. :math:`\sigma_r` restricted to :math:`\sigma_s` equals :math:`\sigma_s`
    restricted to :math:`\sigma_r`.
    """
    sets = {r: set(o) for r, o in orders.items()}
    rs = sorted(orders)
    for i, r in enumerate(rs):
        for s in rs[i + 1:]:
            common = sets[r] & sets[s]
            if [x for x in orders[r] if x in common] != [x for x in orders[s] if x in common]:
                return False
    return True


def stored_once(orders: Mapping[int, Order], stored: Mapping[int, Iterable[int]], ids: Iterable[int]) -> bool:
    r"""True iff every id is stored by exactly one replica, which also received it:
    :math:`\forall x:\ |\{r \mid x \in S_r\}| = 1 \land (x \in S_r \Rightarrow x \in \sigma_r)`."""
    count: dict[int, int] = {}
    for r, st in stored.items():
        got = set(orders.get(r, ()))
        for x in st:
            if x not in got:
                return False
            count[x] = count.get(x, 0) + 1
    return all(count.get(x, 0) == 1 for x in ids)


def dp_rule(orders: Mapping[int, Order], stored: Mapping[int, Iterable[int]], ids: Iterable[int]) -> bool:
    r"""DP-OIJ: :math:`\forall r:\ \sigma_r = \sigma_0` as sequences, :math:`\sigma_0` holds every id once,
    and every id is stored exactly once."""
    idl = list(ids)
    seqs = list(orders.values())
    if not seqs:
        return not idl
    first = list(seqs[0])
    if sorted(first) != sorted(idl) or len(set(first)) != len(first):
        return False
    return all(list(o) == first for o in seqs) and stored_once(orders, stored, idl)


def hp_rule(orders: Mapping[int, Order], stored: Mapping[int, Iterable[int]], key_of: Mapping[int, object]) -> bool:
    r"""HP-OIJ: per key k, the replicas agree on the order of their common k-tuples
    (:func:`common_order` on :math:`\sigma_r|_k`), every tuple is stored exactly once, and
    *coverage*: if x is stored at r then every k-tuple that some replica receives after x
    (in the agreed order) is received by r:
    :math:`x \in S_r \land \exists s: x <_s y \Rightarrow y \in \sigma_r`.
    """
    ids = list(key_of)
    if not stored_once(orders, stored, ids):
        return False
    keys: dict[object, list[int]] = {}
    for x, k in key_of.items():
        keys.setdefault(k, []).append(x)
    for members in keys.values():
        mem = set(members)
        per = {r: [x for x in o if x in mem] for r, o in orders.items()}
        per = {r: o for r, o in per.items() if o}
        if not common_order(per):
            return False
        # coverage
        later: dict[int, set[int]] = {}
        for o in per.values():
            for i, x in enumerate(o):
                later.setdefault(x, set()).update(o[i + 1:])
        for r, st in stored.items():
            got = set(per.get(r, ()))
            for x in st:
                if x in mem and not later.get(x, set()) <= got:
                    return False
    return True


def pairs_decided_once(orders: Mapping[int, Order], stored: Mapping[int, Iterable[int]],
                       pairs: Iterable[tuple[int, int]]) -> bool:
    r"""True iff :math:`|D(a, b)| = 1` for every given (base id, probe id) of the same key (module docstring)."""
    pos = {r: positions(o) for r, o in orders.items()}
    st = {r: set(s) for r, s in stored.items()}
    for a, b in pairs:
        d = 0
        for r, p in pos.items():
            s = st.get(r, set())
            if a in s and b in p and p[a] < p[b]:
                d += 1
            if b in s and a in p and p[b] < p[a]:
                d += 1
        if d != 1:
            return False
    return True
