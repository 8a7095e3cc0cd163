"""One module per ``oij`` command; each exposes ``register(subparsers)``."""
