"""PPOIJ's shared-nothing patterns: KP-, DP- and HP-OIJ, and the entry point that runs them.

Each pattern is a choice of routing (which replicas see a tuple), storing (which one keeps it) and
collector (in what order a replica reads its channels); the mechanisms are in :mod:`oij.parallel.runtime`.
Modules here may use :mod:`oij.spec`, :mod:`oij.parallel.registry` and :mod:`oij.parallel.runtime`; they must not
import :mod:`oij.parallel.shared`.
"""
