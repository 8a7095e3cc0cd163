"""The block engine: every pattern (kp, dp, hp, key, scale) a block at a time, with parallel reading.

Modules, one concern each: :mod:`~parallel.blocks.route` (which replicas store a tuple, per pattern),
:mod:`~parallel.blocks.exchange` (the shared-memory column boxes), :mod:`~parallel.blocks.job` (a worker:
decode, route, join, write), :mod:`~parallel.blocks.driver` (rounds, W carries, the id check, output ranges).
"""
