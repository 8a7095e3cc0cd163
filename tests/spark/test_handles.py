"""oij.spark.handles: the session's JVM handle keeps the classes and methods it looks up, and nothing else.

A round trip to the JVM is counted by wrapping the gateway client's ``send_command``; a lookup is a py4j
reflection command (its first line ``r``), a call is ``c``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytestmark = pytest.mark.spark

MEMORY = "m"
"""py4j's memory command (``py4j.protocol.MEMORY_COMMAND_NAME``): a Java object's proxy freed in Python."""


@contextmanager
def commands(spark: Any) -> Iterator[list[str]]:
    """The py4j commands sent to the JVM inside the block: the first line of each.  Memory commands (``m``) are
    left out: py4j sends one whenever Python's collector frees a proxy of a Java object, which can be any earlier
    test's, at any moment (the fresh clone of 3e7ab1f once saw three inside a one-lookup block)."""
    client = spark.sparkContext._gateway._gateway_client
    sent: list[str] = []
    original: Callable[..., Any] = client.send_command

    def counting(command: str, *args: Any, **kwargs: Any) -> Any:
        first = command.split("\n", 1)[0]
        if first != MEMORY:
            sent.append(first)
        return original(command, *args, **kwargs)

    client.send_command = counting
    try:
        yield sent
    finally:
        del client.send_command  # the instance attribute goes; the class's method is back


def test_the_session_keeps_its_lookups_and_a_plain_view_does_not(spark: Any) -> None:
    """After one ``F.col``, another is a single call: no class lookup (``functions``) and no method lookup
    (``col``).  Negative control: the same name looked up twice through a new, plain ``JVMView`` of the same
    gateway is two reflection commands each time (the counting sees lookups)."""
    from pyspark.sql import functions as F

    from oij.spark.handles import cache_lookups, is_cached

    jvm = spark.sparkContext._jvm
    assert is_cached(jvm) and cache_lookups(jvm) is False  # spark_session() did it; a second call changes nothing
    F.col("warm")
    with commands(spark) as sent:
        F.col("x")
    assert [c for c in sent if c == "r"] == [] and sent.count("c") == 1, sent
    plain = spark.sparkContext._gateway.new_jvm_view()
    assert not is_cached(plain)
    for _ in range(2):
        with commands(spark) as sent:
            plain.java.lang.Math.max(1, 2)
        assert sent.count("r") == 4, sent  # java, lang, Math, max: each looked up again


def test_answers_are_the_same_and_only_lasting_ones_are_kept(spark: Any) -> None:
    """A class, a package and a static method are kept and answer as before; a static field is read again at
    each use (its value is not kept) and a name that does not exist raises at each use."""
    from py4j.protocol import Py4JError

    jvm = spark.sparkContext._jvm
    math = jvm.java.lang.Math
    assert math.max(3, 7) == 7 and math.abs(-2) == 2
    assert "lang" in vars(jvm.java) and "Math" in vars(jvm.java.lang) and "max" in vars(math)
    assert jvm.java.lang.Integer.MAX_VALUE == 2**31 - 1
    assert "MAX_VALUE" not in vars(jvm.java.lang.Integer)
    for _ in range(2):
        with commands(spark) as sent, pytest.raises(Py4JError):
            _ = math.noSuchMethodHere
        assert sent == ["r"]
    assert "noSuchMethodHere" not in vars(math)
