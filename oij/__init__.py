"""oij: the executable specification, the reference oracle and parallel engines of the online interval join."""

import os as _os

__version__ = "0.1.0"

# In a checkout, spec/, reference/, parallel/ and proofs/ sit beside this folder, not in it (pyproject.toml maps
# them under oij).  An installed oij holds them (the wheel; the dev environment's link tree), but a Python started
# in the repository's root has that root first on sys.path (`python -m`, pytest) and imports this folder as oij:
# then the root joins the package's path, so that oij.spec is <root>/spec.  Only when <root> is this project.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_root, "spec", "__init__.py")) and _os.path.isfile(
        _os.path.join(_root, "pyproject.toml")) and _root not in __path__:
    __path__.append(_root)
