"""Shared-memory designs: Key-OIJ and Scale-OIJ (SWMR time-travel index, virtual teams, Alg. 3).

Modules here may use :mod:`oij.spec`, :mod:`oij.reference`, :mod:`oij.parallel.registry` and
:mod:`oij.parallel.runtime` (rings, the replica job loop, the pump); they must not import
:mod:`oij.parallel.patterns`.
"""
