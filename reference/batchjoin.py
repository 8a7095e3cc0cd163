r"""The batch interval join in numpy: :func:`oij.spec.batch.compute_pairs` for int64 columns, as fast as numpy goes.

.. math::

   \mathit{pairs}(A, B) = \{\!\{ (a.id, b.id) \mid a \in A, b \in B, a.key = b.key,
   a.ts + l' \le b.ts \le a.ts + u' \}\!\}

with the inclusive offsets :math:`l', u'` of :mod:`oij.spec.match`.  It knows nothing of arrival order,
watermarks or lateness: on a stream where nothing is late it is the streaming result, and ``oij bench
peers`` uses it as the *floor* every engine is compared with (sort, four ``searchsorted``, expand).

Method: probes sorted by (key, ts) through the composite :math:`c = key \cdot (n+1) + rank(ts)`, where
:math:`rank(t) = |\{j : ts_j < t\}|`; the probes in the window of a base are one contiguous run of
:math:`c`.  :math:`O((|A| + |B|) \log |B| + \mathit{output})`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


def compute_pair_columns(a_id: I64, a_key: I64, a_ts: I64, b_id: I64, b_key: I64, b_ts: I64, lo: int,
                         hi: int) -> tuple[I64, I64]:
    """(base ids, probe ids) of every matching pair, in no particular order.  Keys are int64 codes."""
    n = len(b_ts)
    if n == 0 or len(a_ts) == 0:
        z = np.empty(0, np.int64)
        return z, z
    sts = np.sort(b_ts)
    comp = b_key * (n + 1) + np.searchsorted(sts, b_ts, "left")
    order = np.argsort(comp, kind="stable")
    comp = comp[order]
    rlo = np.searchsorted(sts, a_ts + lo, "left")
    rhi = np.maximum(np.searchsorted(sts, a_ts + hi, "right"), rlo)
    s = np.searchsorted(comp, a_key * (n + 1) + rlo, "left")
    e = np.searchsorted(comp, a_key * (n + 1) + rhi, "left")
    cnt = e - s
    qi = np.repeat(np.arange(len(a_ts)), cnt)
    starts = np.cumsum(cnt) - cnt
    ei = s[qi] + (np.arange(len(qi)) - starts[qi])
    return a_id[qi], b_id[order[ei]]
