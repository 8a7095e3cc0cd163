"""The work behind ``oij join``, ``oij run`` and ``oij generate``, as library functions: each takes an options
object (the command's flags, by the same names) and reads and writes files as the command does.

* :mod:`oij.pipelines.files` -- opening inputs (query flags, oij-jsonl, Parquet, stdin) and writing outputs
  atomically;
* :mod:`oij.pipelines.join` -- the reference oracle from a file to a file (the block and the event path);
* :mod:`oij.pipelines.run` -- a parallel engine from a file or a generated preset to a file;
* :mod:`oij.pipelines.generate` -- a workload's parameters from a preset and overrides.
"""
