"""Flink as an implementation under test (the optional extra ``oij[flink]``: apache-flink from PyPI).

:mod:`oij.flink.sql` drives PyFlink's SQL interval join one tuple at a time.
Nothing here is imported unless a Flink adapter runs.
"""
