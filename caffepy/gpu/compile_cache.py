"""Compiled-kernel caches that are safe across threads and processes.

Kernel binaries (cubins for a CUDA device; shared libraries for the tests' CPU emulator) are
cached on disk under a name derived from a digest of everything that determines them, and the
loaded modules in memory per key. Worker threads of one process and worker processes sharing a
cache directory may all ask for the same kernels at once, so:

* in memory, :class:`OnceMap` makes each value once per key: a lock per key (made under one
  guard lock), the value stored only when complete, so no thread sees a half-made entry and a
  second thread waits for the first one's result instead of building its own;
* on disk, :func:`cached` builds a missing file once: a lock per path in the process, then an
  exclusive ``fcntl.flock`` on ``<file>.lock`` across processes; the builder writes a temporary
  file of its own in the cache directory (``tempfile.mkstemp``: process id, thread id and a
  random suffix), which ``os.replace`` then renames into place, so the final name only ever
  holds a complete file; nothing is loaded before that;
* the temporary file is flushed to disk (fsync) before the rename, so a crash of the machine
  does not leave a short file under the final name either;
* a cached file that is incomplete or does not load (truncated, say) is deleted and rebuilt once;
  if the rebuilt file does not load either, :class:`KernelCacheError` says so in one line. Both
  kinds of binary are ELF files, checked against their headers by :func:`elf_complete` before
  loading: ``dlopen`` of a truncated shared library can kill the process (SIGBUS) rather than
  fail.

:class:`CubinCompiler` is the real device's compile function: nvcc through ``pycuda.compiler``
with pycuda's own cache off (it writes its cache files in place, where a concurrent reader can see
half of one), the cubin kept in caffepy's directory (:func:`default_dir`: ``$CAFFEPY_KERNEL_CACHE``,
else ``$XDG_CACHE_HOME/caffepy/kernels``, else ``~/.cache/caffepy/kernels``), loaded with
``pycuda.driver.module_from_buffer``. pycuda is imported only when it compiles.
"""
import contextlib
import hashlib
import os
import struct
import tempfile
import threading

from ..errors import CaffeError

try:
    import fcntl
except ImportError:          # Windows: no flock; threads are still serialised in the process
    fcntl = None

ENV = "CAFFEPY_KERNEL_CACHE"
NVCC_OPTIONS = ("-std=c++14",)
_MISSING = object()


class KernelCacheError(CaffeError):
    """A cached kernel binary that does not load even after being rebuilt."""


def default_dir(environ=None):
    """Where compiled kernels are kept: ``$CAFFEPY_KERNEL_CACHE``, else the user's cache dir."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV):
        return environ[ENV]
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "caffepy", "kernels")


def digest(*parts):
    """A short hex digest of the text of ``parts`` (a cache file's name)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:24]


class OnceMap(object):
    """A dict whose values are made once per key, however many threads ask at once.

    ``get_or_create(key, factory)`` returns the stored value, or calls ``factory()`` holding the
    key's lock (other keys proceed) and stores its result; a factory that raises stores nothing,
    so the next caller tries again. Reads of present keys take no lock.
    """

    def __init__(self):
        self._values = {}
        self._locks = {}
        self._guard = threading.Lock()

    def lock(self, key):
        """The lock of ``key`` (one per key, made under the guard lock)."""
        lk = self._locks.get(key)
        if lk is None:
            with self._guard:
                lk = self._locks.setdefault(key, threading.Lock())
        return lk

    def get(self, key, default=None):
        return self._values.get(key, default)

    def get_or_create(self, key, factory):
        value = self._values.get(key, _MISSING)
        if value is not _MISSING:
            return value
        with self.lock(key):
            value = self._values.get(key, _MISSING)
            if value is _MISSING:
                value = factory()
                self._values[key] = value
        return value

    def values(self):
        return list(self._values.values())

    def __contains__(self, key):
        return key in self._values

    def __len__(self):
        return len(self._values)


_path_locks = OnceMap()      # only its per-key locks: one per cache file, for this process


@contextlib.contextmanager
def file_lock(path):
    """Hold an exclusive ``flock`` on ``path`` (created if missing) across processes. Each call
    opens its own descriptor, so threads of one process exclude each other too."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)              # releases the lock


def elf_complete(path, require_elf=True):
    """True when the ELF file ``path`` is as long as its headers say: its program headers, every
    segment and the section header table (which linkers write last) lie inside the file. A file
    that is not ELF is incomplete when ``require_elf``, else not judged (True)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(64)
        if head[:4] != b"\x7fELF" or len(head) < 52:
            return not require_elf and head[:4] != b"\x7fELF"
        end = "<" if head[5] == 1 else ">"
        if head[4] == 2:                       # ELFCLASS64
            if len(head) < 64:
                return False
            phoff, shoff = struct.unpack_from(end + "QQ", head, 32)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(end + "HHHH", head, 54)
            seg = struct.Struct(end + "8xQ16xQ")          # p_offset, p_filesz
        else:                                  # ELFCLASS32
            phoff, shoff = struct.unpack_from(end + "II", head, 28)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(end + "HHHH", head, 42)
            seg = struct.Struct(end + "4xI8xI")
        if phoff + phnum * phentsize > size or shoff + shnum * shentsize > size:
            return False
        if phnum and phentsize >= seg.size:
            f.seek(phoff)
            table = f.read(phnum * phentsize)
            for i in range(phnum):
                offset, filesz = seg.unpack_from(table, i * phentsize)
                if offset + filesz > size:
                    return False
    return True


def _identity(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _build(path, build):
    """``build(tmp)`` into a temporary file of this thread's own beside ``path``, then renamed
    onto ``path`` (atomic: readers see the old file, none, or the complete new one)."""
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp",
                               prefix="%s.%d.%d." % (name, os.getpid(), threading.get_ident()))
    os.close(fd)
    try:
        build(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def ensure(path, build):
    """Make sure ``path`` exists, complete: built by ``build(tmp)`` once across the threads of
    this process and the processes sharing its directory. True when this call built it."""
    if os.path.exists(path):
        return False
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with _path_locks.lock(path), file_lock(path + ".lock"):
        if os.path.exists(path):          # built by another thread or process meanwhile
            return False
        _build(path, build)
        return True


def _load(path, load, check):
    if check is not None and not check(path):
        raise ValueError("the file is shorter than its headers say (truncated)")
    return load(path)


def cached(path, build, load, what="kernel binary", check=None):
    """``load(path)`` of the cache file ``path``, built first by ``build(tmp)`` where missing
    (see :func:`ensure`). A file that ``check(path)`` finds incomplete or that fails to load is
    deleted and rebuilt once (unless another thread or process replaced it meanwhile);
    :class:`KernelCacheError` (one line) if the rebuilt file fails too."""
    ensure(path, build)
    seen = _identity(path)
    try:
        return _load(path, load, check)
    except Exception:  # noqa: BLE001  (ctypes raises OSError, pycuda its driver Error)
        pass
    with _path_locks.lock(path), file_lock(path + ".lock"):
        if _identity(path) == seen:       # still the file that failed: drop it and rebuild
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            _build(path, build)
    try:
        return _load(path, load, check)
    except Exception as e:  # noqa: BLE001
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise KernelCacheError("%s %s does not load even after a rebuild (%s); delete the cache "
                               "directory %s or set %s to another one"
                               % (what, path, first, os.path.dirname(path), ENV))


class CubinCompiler(object):
    """The real device's ``compile_fn``: CUDA source -> loaded module, cubins cached on disk.

    The cache file is named by the source, the architecture, the options and nvcc's version
    (what determines the cubin). ``compiles`` counts nvcc runs in this process.
    """

    def __init__(self, arch, directory=None, options=NVCC_OPTIONS, nvcc="nvcc"):
        self.arch = arch
        self.directory = directory or default_dir()
        self.options = tuple(options)
        self.nvcc = nvcc
        self.compiles = 0
        self._count = threading.Lock()

    def path(self, text, nvcc_version):
        key = digest(text, self.arch, " ".join(self.options), nvcc_version)
        return os.path.join(self.directory, "%s-%s.cubin" % (self.arch, key))

    def __call__(self, text):
        from pycuda import compiler, driver

        def build(tmp):
            cubin = compiler.compile(text, nvcc=self.nvcc, options=list(self.options),
                                     no_extern_c=True, arch=self.arch, cache_dir=False)
            with self._count:
                self.compiles += 1
            with open(tmp, "wb") as f:
                f.write(cubin)

        def load(path):
            with open(path, "rb") as f:
                return driver.module_from_buffer(f.read())

        path = self.path(text, compiler.get_nvcc_version(self.nvcc))
        return cached(path, build, load, what="CUDA kernel module",
                      check=lambda p: elf_complete(p, require_elf=False))
