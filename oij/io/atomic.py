"""Writing files so that nothing is lost: a temp file beside the target, fsync, rename.

On any failure (an exception, Ctrl-C, SIGTERM turned into an exception, a
full disk) the target is left exactly as it was, absent or the old file, and
the temporary file is removed.  A process killed with SIGKILL may leave its
temporary file (``.NAME.oij-tmp-*`` beside the target) but never a torn
target.

A target that exists and is not a regular file -- ``/dev/null``, a named pipe, a terminal -- holds nothing to
lose and must stay what it is: it is opened and written in place (a rename over it would put a regular file
where the device was, and as root it would succeed).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from typing import IO

TMP_MARK = ".oij-tmp-"


WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


@contextlib.contextmanager
def naming(path: str) -> Iterator[None]:
    """Give a write error that names no file (ENOSPC, EDQUOT, EFBIG, EROFS) the name ``path``."""
    try:
        yield
    except OSError as e:
        if e.errno in WRITE_ERRNOS and not e.filename:
            raise OSError(e.errno, f"cannot write: {e.strerror}", path) from None
        raise


_HOLDS = [0]


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """A section that a SIGINT or SIGTERM must not cut in two (starting a child process and recording it): oij's
    CLI handler (:func:`oij.cli._interrupt`) keeps a signal that comes inside and takes it a few milliseconds
    after the section ends.  Elsewhere (a library caller, no such handler) it changes nothing."""
    _HOLDS[0] += 1
    try:
        yield
    finally:
        _HOLDS[0] -= 1


def signals_are_deferred() -> bool:
    """True inside :func:`signals_deferred`."""
    return _HOLDS[0] > 0


_NAMED: set[str] = set()
"""The temporary paths this process named (:func:`temp_name`) and has not yet renamed, removed or found taken:
what :func:`remove_leftovers` sweeps."""


def temp_name(directory: str | None, prefix: str) -> str:
    """A fresh name for a temporary file or directory, chosen *before* it is created: the caller assigns it,
    then creates the file inside its ``try`` (``os.open`` with ``O_EXCL``, ``os.mkdir``), so that a Ctrl-C at any
    instant finds the name known to the ``finally`` that removes it (``tempfile.mkstemp`` returns the name only
    after creating the file, and a signal in between would leave it behind).  The caller calls :func:`settled`
    once the path is renamed or removed, or turns out to be another's."""
    import secrets

    path = os.path.join(directory or tempfile.gettempdir(), f"{prefix}{secrets.token_hex(6)}")
    _NAMED.add(path)
    return path


def settled(path: str) -> None:
    """``path`` (from :func:`temp_name`) is renamed, removed, or not ours (``O_EXCL`` found it taken): not swept."""
    _NAMED.discard(path)


def remove_leftovers() -> None:
    """Remove every temporary path still named: oij's CLI calls it once a SIGINT or SIGTERM has unwound the run.

    A signal is taken between any two bytecodes, so the exception it raises can cut a cleanup short before the
    cleanup's own :func:`signals_deferred` section begins (``CanonicalSorter.close`` right after the output was
    committed: its run directory stayed).  A name that was renamed away no longer exists and is skipped.
    O(named paths)."""
    with signals_deferred():
        for path in sorted(_NAMED):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        _NAMED.clear()


def create_exclusive(path: str) -> int:
    """Create ``path`` (which must not exist) for writing, mode 0600; its descriptor.  A name already taken
    (48 random bits: never seen) raises FileExistsError, and the caller must then not remove that file."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)


@contextlib.contextmanager
def atomic_text(path: str) -> Iterator[IO[str]]:
    """``path`` opened for writing text; it appears (whole) only if the block completes."""
    with naming(path), atomic_binary(path) as raw:
        f = open(raw.fileno(), "w", encoding="utf-8", closefd=False, buffering=1 << 20)  # noqa: SIM115 -- a view of the fd
        try:
            yield f
        finally:
            with contextlib.suppress(ValueError):
                f.flush()


def is_special(path: str) -> bool:
    """``path`` exists and is not a regular file or a directory (a device, a named pipe, a socket): written in
    place, never replaced (module docstring)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


@contextlib.contextmanager
def atomic_binary(path: str) -> Iterator[IO[bytes]]:
    """``path`` opened for writing bytes; it appears (whole) only if the block completes (a device or a pipe:
    written in place, :func:`is_special`)."""
    if is_special(path):
        with naming(path), open(path, "wb") as special:
            yield special
        return
    with _replacing(path) as (_, fd), naming(path), os.fdopen(fd, "wb") as f:
        yield f
        f.flush()
        os.fsync(f.fileno())


@contextlib.contextmanager
def _replacing(path: str) -> Iterator[tuple[str, int]]:
    """A new temporary file beside ``path``: its name and a descriptor open for writing, which the block owns
    (closes) and whose data the block makes durable (fsync).  When the block completes, the file takes ``path``'s
    mode and is renamed over it, and the directory is fsynced; otherwise the file is removed (with the signals
    that would interrupt that deferred).  The one tail of :func:`atomic_binary` and :func:`atomic_path`."""
    directory = os.path.dirname(os.path.abspath(path))
    done = False
    tmp = temp_name(directory, "." + os.path.basename(path) + TMP_MARK)
    try:
        try:
            fd = create_exclusive(tmp)
        except FileExistsError:
            settled(tmp)
            tmp = ""  # not ours
            raise
        yield tmp, fd
        _set_mode(tmp, path)
        os.replace(tmp, path)
        done = True
        settled(tmp)
        _fsync_dir(directory)
    finally:
        if not done and tmp:
            with signals_deferred():
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                settled(tmp)


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """A temporary path beside ``path`` for a writer that opens files itself (Parquet); renamed over ``path``
    (after an fsync) only if the block completes, removed otherwise.  A device or a pipe (:func:`is_special`) is
    handed to the writer as it is."""
    if is_special(path):
        with naming(path):
            yield path
        return
    with _replacing(path) as (tmp, fd):
        os.close(fd)
        with naming(path):
            yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def check_writable(path: str) -> str | None:
    """Why ``path`` cannot be written (a missing directory, a directory, no permission), or None.

    Checked before a command starts work, so that a long run does not end in
    a write error that could have been seen at once.  ``-`` is stdout.
    """
    if path == "-":
        return None
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"directory {directory} does not exist"
    if os.path.isdir(path):
        return "is a directory"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"directory {directory} is not writable"
    return None


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (``-``: stdout)."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    with atomic_text(path) as f:
        f.write(text)


def _set_mode(tmp: str, path: str) -> None:
    """The replaced file's mode, or the umask's default for a new file (mkstemp makes it 0600)."""
    if os.path.exists(path):
        with contextlib.suppress(OSError):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
    else:
        os.chmod(tmp, 0o666 & ~_umask())


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
