"""The process runtime every shared-nothing pattern runs on: processes, rings, routing, joining, collecting.

What lives here: :mod:`.ring` (SPSC shared-memory rings of numpy records),
:mod:`.emitter` (chunks and routing, inside the driver), :mod:`.collector`
(the standard, round-robin and naive collectors a replica reads its input
rings through), :mod:`.replica` (the replica process), :mod:`.store` (the
vectorised two-tier join state), :mod:`.balance` (PPOIJ Alg. 1, run by
replica 0), :mod:`.sink` and :mod:`.metrics` (results and counts), and
:mod:`.driver` (the pool of processes that owns every segment).

It may use :mod:`oij.spec` and :mod:`oij.parallel.registry`; it must not import
:mod:`oij.parallel.patterns` or :mod:`oij.parallel.shared` (checked by import-linter).
"""
