"""Pathway as an implementation under test (the optional extra ``oij[pathway]``: ``pathway`` from PyPI).

:mod:`oij.pathway.join` runs Pathway's ``interval_join`` on one case, each
event at its own processing time.  Nothing here is imported unless a Pathway
adapter runs.
"""
