"""Machine-checked arguments about the specification (SMT, z3).  See manifest.toml."""
