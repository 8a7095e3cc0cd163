"""The executable specification of the online interval join (OIJ).

Read it in this order:

1. :mod:`spec.model` -- tuples, watermarks, end of stream, the query;
2. :mod:`spec.match` -- the window of a base tuple and the match predicate;
3. :mod:`spec.aggregate` -- per-base window aggregates, exact;
4. :mod:`spec.batch` -- batch semantics: pairs and aggregate rows;
5. :mod:`spec.watermark` -- watermarks, lateness, when a tuple is late;
6. :mod:`spec.stream` -- streaming semantics: what is emitted and when;
7. :mod:`spec.purge` -- which stored tuples are still needed.

Every function is small, pure and slow on purpose: clarity first.  The fast
sequential oracle that mirrors it is :mod:`reference`.
"""
