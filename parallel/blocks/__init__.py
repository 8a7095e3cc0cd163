"""The block engine: every pattern (kp, dp, hp, key, scale) a block at a time, with parallel reading.

Modules, one concern each: :mod:`~oij.parallel.blocks.route` (which replicas store a tuple, per pattern),
:mod:`~oij.parallel.blocks.exchange` (the shared-memory column boxes), :mod:`~oij.parallel.blocks.job` (a worker:
decode, route, join, write), :mod:`~oij.parallel.blocks.driver` (rounds, W carries, the id check, output ranges).
"""
