"""Files written atomically: a temporary file in the same directory, fsync, the mode the umask
gives, rename, fsync of the directory. A failure (a full disk, ...) removes the temporary file and
raises one :class:`~caffepy.errors.WriteError` line; the file it would replace keeps what it held.
Snapshots, weights (binary and HDF5), solver states, checkpoints and net JSON are all written so.
"""
import contextlib
import errno
import os
import re
import tempfile

from ..errors import WriteError


def file_mode():
    """The mode a new file gets from ``open`` (0666 less the umask), as Caffe's files have; the
    temporary files of :func:`atomic_write` are created 0600 and set to it before the rename."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_error(path, error):
    """A one-line :class:`~caffepy.errors.WriteError` for ``error`` (an OSError, or h5py's error
    text) raised while writing ``path``: ``cannot write PATH: no space left on device (...)``."""
    if isinstance(error, WriteError):
        return error
    code = getattr(error, "errno", None)
    text = " ".join(str(error).split())
    if code is None:
        m = re.search(r"errno = (\d+)", text)           # h5py: "... errno = 28, error message = ..."
        code = int(m.group(1)) if m else (errno.ENOSPC if "No space left" in text else None)
    why = os.strerror(code).lower() if code else text
    return WriteError("cannot write %s: %s (a file it would replace is unchanged)"
                      % (os.fspath(path), why), code)


def atomic_write(path, data):
    """Write bytes (or a list of bytes-like chunks) to ``path`` atomically: temp file in the same
    dir, fsync, mode from the umask, rename. A failure (disk full, ...) removes the temp file and
    raises a one-line :class:`~caffepy.errors.WriteError`; ``path`` keeps what it held."""
    path = os.fspath(path)
    try:
        _atomic_write(path, data)
    except OSError as e:
        raise write_error(path, e) from e


def _atomic_write(path, data):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as f:
            for chunk in ([data] if isinstance(data, (bytes, bytearray, memoryview)) else data):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(d)


@contextlib.contextmanager
def atomic_path(path, suffix=".tmp"):
    """For writers that need a path (h5py): yields a temporary path beside ``path``; when the
    block ends it is fsynced and renamed to ``path`` (as :func:`atomic_write`); when the block
    raises, it is removed, and an OSError (or h5py's error text) becomes a WriteError."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=suffix, dir=d)
        os.fchmod(fd, file_mode())
        os.close(fd)
    except OSError as e:
        raise write_error(path, e) from e
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) or "errno" in str(e):
            raise write_error(path, e) from e
        raise
    _fsync_dir(d)


def _fsync_dir(d):
    try:
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
