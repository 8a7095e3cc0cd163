"""Names in the JVM looked up once per process, not once per use.

Every Column function of pyspark (``F.col``, ``F.when``, ``F.lit``, ...) reaches its Java method by two lookups
before the call: ``sc._jvm.functions``, a class that py4j finds by trying the name in each package pyspark
imported (most of them miss, and each miss searches the 280 jars of the class path), then ``.col``, a method
that py4j finds by reflection.  An oracle plan makes thousands of such calls.  Measured on the tests' session
(a profile of the JVM's py4j threads while the Spark tests ran): 18 % of their samples were those class
lookups and 5 % the method lookups.

:func:`cache_lookups` changes the class of the process's ``JVMView`` (and of every class and package reached
through it) to a subclass that keeps what a lookup found as an attribute: the next use of the same name is a
Python attribute read, with no round trip to the JVM.  Only lookups whose answer cannot change while the JVM
lives are kept: a class, a package, a method.  A static field's value is read from the JVM every time, and a
name that does not exist raises as before, every time.

Data flow::

    F.col("x") -> sc._jvm.functions (kept after the first use) -> .col (kept) -> one call to the JVM

Process state: the gateway's one ``JVMView`` object, whose class is changed in place (pyspark keeps it in
``SparkContext._jvm`` and in each context and session, so every holder sees the change); it lives as long as
the gateway, across ``SparkSession.stop()`` and a new session in the same process.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _classes() -> tuple[type[Any], type[Any], type[Any]]:
    """The caching subclasses of py4j's JVMView, JavaPackage and JavaClass (made once; py4j imported here, so
    that importing this module starts nothing)."""
    from py4j.java_gateway import JavaClass, JavaMember, JavaPackage, JVMView

    def keep(owner: Any, name: str, found: Any) -> Any:
        if isinstance(found, JavaClass):
            found.__class__ = CachedClass
        elif isinstance(found, JavaPackage):
            found.__class__ = CachedPackage
        elif not isinstance(found, JavaMember):
            return found  # a static field's value: read again at each use
        owner.__dict__[name] = found
        return found

    class CachedView(JVMView):
        def __getattr__(self, name: str) -> Any:
            return keep(self, name, JVMView.__getattr__(self, name))

    class CachedPackage(JavaPackage):
        def __getattr__(self, name: str) -> Any:
            return keep(self, name, JavaPackage.__getattr__(self, name))

    class CachedClass(JavaClass):
        def __getattr__(self, name: str) -> Any:
            return keep(self, name, JavaClass.__getattr__(self, name))

    return CachedView, CachedPackage, CachedClass


def cache_lookups(jvm: Any) -> bool:
    """Make ``jvm`` (pyspark's ``SparkContext._jvm``, a py4j ``JVMView``) keep the classes, packages and methods
    it looks up.  True if it was changed now, False if it already kept them (or is not a plain ``JVMView``:
    then it is left alone).  O(1).

    Requires: no other code relies on ``type(jvm) is JVMView``.  Changes: the class of ``jvm``.  The answers of
    every lookup are the same as before; only the round trips of repeated ones are saved."""
    from py4j.java_gateway import JVMView

    if type(jvm) is not JVMView:
        return False
    jvm.__class__ = _classes()[0]
    return True


def is_cached(jvm: Any) -> bool:
    """True when ``jvm`` keeps its lookups (:func:`cache_lookups` changed it)."""
    return type(jvm) is _classes()[0]


__all__ = ["cache_lookups", "is_cached"]
