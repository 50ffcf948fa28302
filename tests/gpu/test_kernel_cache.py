"""The on-disk kernel cache from many threads and processes at once, on the emulator's host-built
libraries (``tests.gpu.emulator.build_library`` over ``caffepy.gpu.compile_cache``): one compile
per library however many ask, no library loaded before it is complete, a corrupt cached library
rebuilt, and the in-memory caches made once per key."""
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from caffepy.gpu import compile_cache

from . import emulator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT = 'extern "C" int add_one(int x) { return x + 1; }\n'
THREADS = 8

pytestmark = pytest.mark.skipif(not emulator.compiler(), reason="no C++ compiler (g++/c++)")


@pytest.fixture
def compiles(monkeypatch):
    """The outputs of every host compiler run in this test (each run held a little, so that the
    other threads arrive while it is under way)."""
    calls = []
    real = emulator.compile_cxx

    def counted(source, out):
        calls.append(out)
        time.sleep(0.2)
        real(source, out)
    monkeypatch.setattr(emulator, "compile_cxx", counted)
    return calls


def _library_name(text=TEXT):
    return "k%s.so" % compile_cache.digest(emulator.SHIM + text)


def _in_threads(fn, n=THREADS):
    """fn(i) from n threads released together; their results in order."""
    barrier = threading.Barrier(n)

    def run(i):
        barrier.wait()
        return fn(i)
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


def test_one_library_from_8_threads_is_compiled_once(tmp_path, compiles):
    libs = _in_threads(lambda i: emulator.build_library(TEXT, str(tmp_path)))
    assert [lib.add_one(i) for i, lib in enumerate(libs)] == list(range(1, THREADS + 1))
    assert len(compiles) == 1
    name = _library_name()
    assert sorted(os.listdir(tmp_path)) == [name, name + ".lock"]     # no temporary file left


_SNIPPET = """
import os, sys, time
from tests.gpu import emulator
directory, me = sys.argv[1], sys.argv[2]
calls = []
real = emulator.compile_cxx
def counted(source, out):
    calls.append(out)
    time.sleep(0.3)
    real(source, out)
emulator.compile_cxx = counted
open(os.path.join(directory, me + ".ready"), "w").close()
while not os.path.exists(os.path.join(directory, "go")):
    time.sleep(0.002)
lib = emulator.build_library(%r, os.path.join(directory, "cache"))
print(lib.add_one(41), len(calls))
""" % TEXT


def test_one_library_from_2_processes_is_compiled_once(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    procs = [subprocess.Popen([sys.executable, "-c", _SNIPPET, str(tmp_path), "p%d" % i],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(2)]
    deadline = time.time() + 120
    while not all((tmp_path / ("p%d.ready" % i)).exists() for i in range(2)):
        assert time.time() < deadline and all(p.poll() is None for p in procs), \
            [p.communicate() for p in procs]
        time.sleep(0.01)
    (tmp_path / "go").touch()
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    answers, counts = zip(*[tuple(int(v) for v in out.split()) for out, _ in outs])
    assert answers == (42, 42) and sum(counts) == 1
    name = _library_name()
    assert sorted(os.listdir(tmp_path / "cache")) == [name, name + ".lock"]


def test_a_truncated_cached_library_is_rebuilt(tmp_path, compiles):
    good = emulator.build_library(TEXT, str(tmp_path / "a"))
    assert good.add_one(1) == 2 and len(compiles) == 1
    name = _library_name()
    data = (tmp_path / "a" / name).read_bytes()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / name).write_bytes(data[:len(data) // 3])      # as a crash would leave it
    lib = emulator.build_library(TEXT, str(tmp_path / "b"))
    assert lib.add_one(5) == 6 and len(compiles) == 2
    assert compile_cache.elf_complete(str(tmp_path / "b" / name))


def test_a_library_that_never_loads_is_one_clear_line(tmp_path, monkeypatch):
    calls = []

    def garbage(source, out):
        calls.append(out)
        with open(out, "wb") as f:
            f.write(b"not a shared library")
    monkeypatch.setattr(emulator, "compile_cxx", garbage)
    with pytest.raises(compile_cache.KernelCacheError) as e:
        emulator.build_library(TEXT, str(tmp_path))
    msg = str(e.value)
    assert "\n" not in msg and "after a rebuild" in msg and compile_cache.ENV in msg
    assert len(calls) == 2                                     # the first build and one rebuild


def test_a_failed_compile_leaves_no_file_and_is_retried(tmp_path, compiles):
    with pytest.raises(RuntimeError, match="host build of kernels failed"):
        emulator.build_library("this is not C++;\n", str(tmp_path))
    assert [f for f in os.listdir(tmp_path) if not f.endswith(".lock")] == []
    with pytest.raises(RuntimeError):
        emulator.build_library("this is not C++;\n", str(tmp_path))
    assert len(compiles) == 2


def test_emulated_device_makes_each_family_once_from_8_threads(tmp_path, monkeypatch):
    monkeypatch.setattr(emulator, "default_cache_dir", lambda: str(tmp_path))
    dev = emulator.EmulatedDevice()

    def work(i):
        k = dev.kernels("util", np.float32 if i % 2 else "float32")
        y = np.zeros(5, np.float32)
        k.fill(5, float(i), y)
        return k, y
    results = _in_threads(work)
    assert len({id(k) for k, _ in results}) == 1 and dev.cache.compiles == 1
    for i, (_, y) in enumerate(results):
        assert np.all(y == i)
    assert len([f for f in os.listdir(tmp_path) if f.endswith(".so")]) == 1


def test_once_map_makes_each_value_once_and_retries_after_a_failure():
    made = []
    m = compile_cache.OnceMap()

    def factory():
        made.append(1)
        time.sleep(0.05)
        return object()
    values = _in_threads(lambda i: m.get_or_create(i % 2, factory))
    assert len(made) == 2 and values[0] is values[2] and values[1] is values[3]
    with pytest.raises(ZeroDivisionError):
        m.get_or_create("x", lambda: 1 / 0)
    assert "x" not in m and m.get_or_create("x", lambda: 7) == 7 and len(m) == 3


def test_elf_completeness_check(tmp_path):
    lib = emulator.build_library(TEXT, str(tmp_path))
    assert lib.add_one(0) == 1
    path = tmp_path / _library_name()
    data = path.read_bytes()
    assert compile_cache.elf_complete(str(path))
    for cut in (10, 60, len(data) // 2, len(data) - 1):
        (tmp_path / "cut").write_bytes(data[:cut])
        assert not compile_cache.elf_complete(str(tmp_path / "cut")), cut
    (tmp_path / "other").write_bytes(b"a cubin of another format")
    assert not compile_cache.elf_complete(str(tmp_path / "other"))
    assert compile_cache.elf_complete(str(tmp_path / "other"), require_elf=False)
