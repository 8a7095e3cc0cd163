"""Sphinx configuration: the spec is rendered from its docstrings (autodoc + math)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ext"))

project = "oij"
author = "the oij developers"
copyright = "2026, the oij developers"
# sphinx-mathjax-offline (the dev extra) ships MathJax 3 and copies it into the built site's _static/mathjax/;
# it sets mathjax_path to that copy, so the formulas render with no network (tests/project/test_docs_offline.py checks).
# It must come after sphinx.ext.mathjax, whose default mathjax_path is a CDN.
extensions = ["sphinx.ext.autodoc", "sphinx.ext.mathjax", "sphinx-mathjax-offline", "sphinx.ext.viewcode",
              "archgraph", "provediagrams", "oijexec", "oijlists", "benchplots"]
html_static_path = ["_static"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False}
nitpicky = True
# No network at build time (no intersphinx): types of other packages in signatures are not linked.
nitpick_ignore_regex = [(r"py:.*", r"(z3|networkx|numpy|npt|hypothesis|pyspark|pyarrow|collections|typing|"
                         r"multiprocessing|shared_memory|np|bisect|concurrent|argparse|pathlib|io|os|queue|threading|fractions|decimal|random|"
                         r"contextlib|AbstractContextManager|dataclasses|"
                         r"pa)"  # pyarrow as the readers import it (for type checking only, where it is lazy)
                         r"(\..*)?"),
                        (r"py:class", r"oij\.io\.extsort\._\w+"),  # private helpers named in public annotations
                        (r"py:class", r"oij\.reference\.schedule\._Judge"),  # the judge's working state
                        (r"py:.*", r"oij\.proofs\.verdicts\.S"),
                        (r"py:class", r"oij\.pipelines\.files\.T"),  # the type variable of progress()
                        (r"py:class", r"oij\.options\.T"),  # the options dataclass from_args builds
                        (r"py:class", r"Outcome"),  # oij.testing._runner's, imported for type checking only
                        (r"py:class", r"SearchStrategy"),  # hypothesis's, imported for type checking only
                        (r"py:class", r"ProtocolError"),  # oij.testing._protocol's, a private module's name
                        (r"py:class", r"Impl")]  # oij.testing's alias of an implementation under test
exclude_patterns = ["_build", "_generated/*.rst", "_generated/results/*.rst"]
html_theme = "alabaster"
suppress_warnings: list[str] = []
