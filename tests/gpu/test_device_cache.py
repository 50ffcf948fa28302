"""The real device's caches from many threads, without a GPU: ``caffepy.gpu.device.Device`` over a
fake pycuda (driver, compiler, gpuarray, tools) compiles each kernel family once per (context,
dtype) into caffepy's cubin cache, and makes its cuBLAS / cuDNN handles once per context, however
many worker threads ask at once. On a real GPU (marked ``gpu``) the same from 8 threads."""
import atexit
import os
import sys
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from caffepy import gpu
from caffepy.gpu import compile_cache, cudnn, device, kernels

THREADS = 8


def _in_threads(fn, n=THREADS):
    barrier = threading.Barrier(n)

    def run(i):
        barrier.wait()
        return fn(i)
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


class FakePycuda(object):
    """The parts of pycuda that Device uses, recording what is compiled, loaded and created."""

    def __init__(self):
        self.compiled, self.loaded, self.pushes = [], [], []
        self.lock = threading.Lock()
        fake = self

        class Error(Exception):
            pass

        class Context(object):
            def push(self):
                fake.pushes.append(threading.get_ident())

            @staticmethod
            def pop():
                pass

        class CuDevice(object):
            count = staticmethod(lambda: 1)

            def __init__(self, i):
                self.i = i

            def retain_primary_context(self):
                return Context()

            def compute_capability(self):
                return (8, 0)

        class Stream(object):
            handle = 1234

            def synchronize(self):
                pass

        class Module(object):
            def __init__(self, cubin):
                self.cubin = cubin

            def get_function(self, name):
                return types.SimpleNamespace(name=name, prepare=lambda codes: None)

        def module_from_buffer(data):
            if data.startswith(b"BAD"):
                raise Error("cuModuleLoadData failed: device kernel image is invalid")
            with fake.lock:
                fake.loaded.append(data)
            return Module(data)

        def compile(text, nvcc="nvcc", options=None, no_extern_c=False, arch=None,
                    cache_dir=None, **kw):
            assert cache_dir is False and no_extern_c and arch == "sm_80"
            with fake.lock:
                fake.compiled.append(text)
            time.sleep(0.05)                    # long enough for the other threads to arrive
            return ("CUBIN %s %s" % (arch, compile_cache.digest(text))).encode()

        self.driver = types.ModuleType("pycuda.driver")
        self.driver.__dict__.update(
            Error=Error, init=lambda: None, Device=CuDevice, Context=Context, Stream=Stream,
            module_from_buffer=module_from_buffer)
        self.compiler = types.ModuleType("pycuda.compiler")
        self.compiler.__dict__.update(compile=compile,
                                      get_nvcc_version=lambda nvcc: "fake nvcc 13.0")
        self.gpuarray = types.ModuleType("pycuda.gpuarray")
        self.tools = types.ModuleType("pycuda.tools")
        self.tools.DeviceMemoryPool = lambda: types.SimpleNamespace(allocate=lambda n: object())
        self.package = types.ModuleType("pycuda")
        self.package.__dict__.update(driver=self.driver, compiler=self.compiler,
                                     gpuarray=self.gpuarray, tools=self.tools)

    def install(self, monkeypatch):
        for name in ("", ".driver", ".compiler", ".gpuarray", ".tools"):
            mod = getattr(self, name[1:] or "package")
            monkeypatch.setitem(sys.modules, "pycuda" + name, mod)


class Counted(object):
    """A stand-in for Cublas / Cudnn that counts the handles made (slowly, to widen races)."""
    made = []

    def __init__(self, *args, **kw):
        time.sleep(0.05)
        Counted.made.append(type(self).__name__)
        self.tf32 = False

    def close(self):
        pass


class FakeCublas(Counted):
    pass


class FakeCudnn(Counted):
    pass


@pytest.fixture
def fake_pycuda(monkeypatch, tmp_path):
    if gpu.is_active():
        pytest.skip("a device is active in this process already")
    fake = FakePycuda()
    fake.install(monkeypatch)
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path / "kernels"))
    monkeypatch.setattr(device, "Cublas", FakeCublas)
    monkeypatch.setattr(cudnn, "Cudnn", FakeCudnn)
    monkeypatch.setattr(Counted, "made", [])
    yield fake
    for dev in list(gpu._active.values()):
        atexit.unregister(dev._close)
    gpu.uninstall(0)


def test_device_compiles_each_family_once_and_makes_one_handle_per_context(fake_pycuda, tmp_path):
    def work(i):
        dev = gpu.current(0)                 # activates device 0 on first use
        k = dev.kernels("util", np.float32 if i % 2 else "float32")
        k64 = dev.kernels("util", np.float64)
        return dev, dev.cudnn, k, k64
    results = _in_threads(work)
    devs, cuds, k32s, k64s = zip(*results)
    assert len(set(map(id, devs))) == 1 and len(set(map(id, cuds))) == 1
    assert len(set(map(id, k32s))) == 1 and len(set(map(id, k64s))) == 1
    assert sorted(Counted.made) == ["FakeCublas", "FakeCudnn"]
    assert len(fake_pycuda.compiled) == 2 and len(fake_pycuda.loaded) == 2
    dev = devs[0]
    assert dev.cache.compiles == 2 and dev.compiler.compiles == 2
    assert dev.compiler.directory == str(tmp_path / "kernels")
    files = sorted(os.listdir(tmp_path / "kernels"))
    cubins = [f for f in files if f.endswith(".cubin")]
    assert len(cubins) == 2 and all(f.startswith("sm_80-") for f in cubins)
    assert set(files) == set(cubins) | {f + ".lock" for f in cubins}      # no temporary file
    assert k32s[0].fill.__name__ == "fill"
    assert len(set(fake_pycuda.pushes)) == THREADS       # the context pushed once in each thread


def test_cubins_are_reused_from_disk_and_a_bad_one_is_rebuilt(fake_pycuda, tmp_path):
    kernels.load_all_sources()
    text = kernels.translation_unit("util", np.float32)
    first = compile_cache.CubinCompiler("sm_80")
    mods = _in_threads(lambda i: first(text))
    assert first.compiles == 1 and len({m.cubin for m in mods}) == 1
    second = compile_cache.CubinCompiler("sm_80")          # a new process, say: from the disk
    assert second(text).cubin == mods[0].cubin and second.compiles == 0
    path = second.path(text, "fake nvcc 13.0")
    with open(path, "wb") as f:
        f.write(b"BAD cubin")                                # loads with a driver error
    assert second(text).cubin == mods[0].cubin and second.compiles == 1
    with open(path, "wb") as f:
        f.write(b"\x7fELF\x02\x01\x01" + b"\0" * 20)          # a truncated ELF: not even tried
    assert second(text).cubin == mods[0].cubin and second.compiles == 2
    assert len(fake_pycuda.loaded) == THREADS + 3     # a module per call: KernelCache keeps one


def test_default_cache_dir_env_then_xdg_then_home():
    assert compile_cache.default_dir({"CAFFEPY_KERNEL_CACHE": "/x/k"}) == "/x/k"
    assert compile_cache.default_dir({"XDG_CACHE_HOME": "/c"}) == "/c/caffepy/kernels"
    assert compile_cache.default_dir({}).endswith(os.path.join(".cache", "caffepy", "kernels"))


@pytest.mark.gpu
def test_real_device_compiles_a_family_once_from_8_threads(cuda, tmp_path):
    compiler = compile_cache.CubinCompiler(cuda.arch, directory=str(tmp_path))
    cache = kernels.KernelCache(compiler)
    arrays = [cuda.empty(1000, np.float32) for _ in range(THREADS)]

    def work(i):
        cuda.make_current()
        try:
            k = cache.kernels("test", "util", np.float32, cuda._get_function, cuda._launch)
            k.fill(1000, float(i), arrays[i])
            return k, cuda.to_host(arrays[i])
        finally:
            cuda.release_current()
    results = _in_threads(work)
    assert compiler.compiles == 1 and cache.compiles == 1
    assert len({id(k) for k, _ in results}) == 1
    for i, (_, host) in enumerate(results):
        assert np.all(host == i)
    again = compile_cache.CubinCompiler(cuda.arch, directory=str(tmp_path))
    kernels.KernelCache(again).module("test", "util", np.float32)
    assert again.compiles == 0                                # from the disk
