"""The Spark layer: the distributed oracle and the differential-testing pipeline of ``oij check``.

* :mod:`oij.spark.session` -- the Java check and a quiet SparkSession (``local[*]`` or a cluster);
* :mod:`oij.spark.frames` -- events as DataFrames (Parquet fast path, converter, validation);
* :mod:`oij.spark.oracle` -- the streaming semantics of the spec in Spark (watermarks by window
  functions, bucketed range join, hot-key salting);
* :mod:`oij.spark.salting` -- PPOIJ Alg. 1, which chooses each hot group's number of salts;
* :mod:`oij.spark.compare` -- engine vs oracle: missing/extra rows, wrong aggregates, late sets;
* :mod:`oij.spark.workload` -- the small built-in workload ``oij check`` runs with no arguments.

pyspark is imported lazily, inside the functions that need it.
"""
