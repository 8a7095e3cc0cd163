"""Writing files so that nothing is lost: a temp file beside the target, fsync, rename.

On any failure (an exception, Ctrl-C, SIGTERM turned into an exception, a
full disk) the target is left exactly as it was, absent or the old file, and
the temporary file is removed.  A process killed with SIGKILL may leave its
temporary file (``.NAME.oij-tmp-*`` beside the target) but never a torn
target.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import IO

TMP_MARK = ".oij-tmp-"


@contextlib.contextmanager
def atomic_text(path: str) -> Iterator[IO[str]]:
    """``path`` opened for writing text; it appears (whole) only if the block completes."""
    with atomic_binary(path) as raw:
        f = open(raw.fileno(), "w", encoding="utf-8", closefd=False, buffering=1 << 20)  # noqa: SIM115 -- a view of the fd
        try:
            yield f
        finally:
            with contextlib.suppress(ValueError):
                f.flush()


@contextlib.contextmanager
def atomic_binary(path: str) -> Iterator[IO[bytes]]:
    """``path`` opened for writing bytes; it appears (whole) only if the block completes."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + TMP_MARK, dir=directory)
    done = False
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(path):
            with contextlib.suppress(OSError):
                os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        done = True
        _fsync_dir(directory)
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (``-``: stdout)."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    with atomic_text(path) as f:
        f.write(text)


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
