"""The parallel engines.  Each registers itself in :mod:`oij.parallel.registry` when imported.

Engines land one module per concern; ``oij check`` and ``oij run`` find them
through the registry, so a new engine is checked against the oracle from the
day it lands.
"""
