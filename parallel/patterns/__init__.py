"""PPOIJ's shared-nothing patterns: KP-, DP- and HP-OIJ, and the entry point that runs them.

Each pattern is a choice of routing (which replicas see a tuple), storing (which one keeps it) and
collector (in what order a replica reads its channels); the mechanisms are in :mod:`parallel.runtime`.
Modules here may use :mod:`spec`, :mod:`parallel.registry` and :mod:`parallel.runtime`; they must not
import :mod:`parallel.shared`.
"""
