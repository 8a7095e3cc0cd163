"""oij: the executable specification, the reference oracle and parallel engines of the online interval join."""

__version__ = "0.1.0"
