"""The executable specification of the online interval join (OIJ).

Read it in this order:

1. :mod:`oij.spec.model` -- tuples, watermarks, end of stream, the query;
2. :mod:`oij.spec.match` -- the window of a base tuple and the match predicate;
3. :mod:`oij.spec.aggregate` -- per-base window aggregates, exact;
4. :mod:`oij.spec.batch` -- batch semantics: pairs and aggregate rows;
5. :mod:`oij.spec.watermark` -- watermarks, lateness, when a tuple is late;
6. :mod:`oij.spec.stream` -- streaming semantics: what is emitted and when;
7. :mod:`oij.spec.purge` -- which stored tuples are still needed;
8. :mod:`oij.spec.ordering` -- the collector ordering rules of the parallel
   patterns, as predicates over replica traces;
9. :mod:`oij.spec.profiles` -- semantic profiles: the deliberate differences of
   real systems as named parameters, and the result under each;
10. :mod:`oij.spec.recovery` -- exactly-once across crashes and restores: what a
    run with restarts commits, and how it is judged;
11. :mod:`oij.spec.schedule` -- judging up to schedule: the watermark schedules an
    engine may choose (families), and the outputs some schedule explains.

The papers cited by name (PPOIJ, Scale-OIJ, ...) are listed with full
citations in the bibliography (:doc:`/bibliography`, ``docs/bibliography.rst``).

Every function is small, pure and slow on purpose: clarity first.  The fast
sequential oracle that mirrors it is :mod:`oij.reference`.
"""
