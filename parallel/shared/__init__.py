"""Shared-memory designs: Key-OIJ and Scale-OIJ (SWMR time-travel index, virtual teams, Alg. 3).

Modules here may use :mod:`spec`, :mod:`reference`, :mod:`parallel.registry` and
:mod:`parallel.runtime` (rings, the replica job loop, the pump); they must not import
:mod:`parallel.patterns`.
"""
