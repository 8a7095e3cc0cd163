"""The conformance kit's power (``oij bench kit-power``), measured with mutants it was not built around.

Method (docs/conformance.rst, "How the kit checks itself", has the table):

* **Mutation tool: cosmic-ray** (``pip install 'oij[mutation]'``).  The test
  here is a *command* (``oij conform``) judged by its exit code, and
  cosmic-ray's unit of work is exactly that: one mutation, one test command.
  mutmut 3 runs a pytest suite in-process through trampolines and cannot take
  a command.  oij uses cosmic-ray's operators and its AST machinery
  (``cosmic_ray.plugins``, ``cosmic_ray.mutating.mutate_code``) to enumerate
  and apply every mutant, and runs them itself on copies in temporary
  directories, ``--jobs`` at a time: cosmic-ray's own ``exec`` rewrites the
  file in the working tree and runs one mutant at a time.
* **Operators**: every core operator of cosmic-ray, except that arithmetic is
  replaced only by arithmetic (``+ - * / // %``, not by bit operators or ``**``) and
  comparisons only by comparisons (not by ``is``, whose result on ints
  depends on CPython's small-int cache), and the two operators that need
  arguments (``VariableInserter``, ``VariableReplacer``).  No mutant is
  picked by hand.
* **Targets**: ``accum`` -- ``tests/impls/accum_oij.py``, an implementation
  written from docs/semantics.rst apart from reference/, run as
  ``python MUTANT``; ``sorted`` and ``bucket`` -- ``tests/impls/sorted_oij.py``
  (sorted indexes per key, bisect range queries, exact Fraction sums) and
  ``tests/impls/bucket_oij.py`` (fixed-width int64 arithmetic, time buckets,
  one timer heap, a 2^-1074 fixed-point sum), written from the docs alone by
  another author, claiming ``all,cond``; ``oracle`` -- ``reference/oracle.py`` itself, run as a
  command through ``tests/impls/oracle_cmd.py`` with a mutated copy of
  ``reference/`` imported first (``--prefer DIR``; the kit, in its own
  process, judges with the real one), claiming ``all,cond``.
* **Verdict** per mutant: ``oij conform`` at its defaults (200 cases, seed 0,
  the test vectors first): exit 1 killed, exit 0 survived; a survivor listed
  in the manifest ``tests/impls/mutants.toml`` with a one-line reason is
  *equivalent* (its entry names the original line, so a stale entry is
  reported, not trusted).

Data flow::

    target file --cosmic-ray operators--> (operator, occurrence) list --mutate_code--> mutant source
      --> temp dir (the file, or a copy of its package) --> oij conform -- CMD  (subprocess, --jobs at once)
      --> exit code, "minimal case of N events", "found by" --> manifest applied --> JSON (+ docs table)

Processes and files: each mutant runs in its own temporary directory, created
and removed by the thread that runs it; ``oij conform`` runs in its own
session and its whole process group is killed on ``--timeout`` or Ctrl-C.
The working tree is only read.

Modules, one concern each: :mod:`~oij.bench.kitpower.mutants` (the targets, the operators, every mutant and
its source), :mod:`~oij.bench.kitpower.evidence` (the manifest of equivalent mutants and unreached code),
:mod:`~oij.bench.kitpower.runner` (one mutant under ``oij conform``: recording, replay, judging, the real
run), :mod:`~oij.bench.kitpower.gaps` (``--deep`` and ``--exhaustive``), :mod:`~oij.bench.kitpower.score`,
:mod:`~oij.bench.kitpower.render` and :mod:`~oij.bench.kitpower.measure` (the command's flow).  This file
imports none of them.
"""
