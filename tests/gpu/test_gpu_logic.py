"""CPU-side logic of the GPU path, tested without a GPU: the row-major -> column-major cuBLAS
mapping, library discovery, kernel signatures / cache keys / launch arithmetic, the blob mirror
state machine (with a fake device), Philox against its published answers, and that the CPU path
never imports pycuda while GPU mode without it fails with one line naming the fix."""
import os
import subprocess
import sys

import struct

import numpy as np
import pytest

from caffepy import blob as blob_mod
from caffepy.blob import DEVICE, HOST, SYNCED, Blob, SyncedBlob
from caffepy.errors import CaffeError
from caffepy.gpu import cublas, kernels, random

from .emulator import ColumnMajorBlas

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- cuBLAS mapping ----------------------------------------------------------------------------
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_major_gemm_through_column_major_blas(ta, tb, dtype):
    m, n, k = 3, 5, 4
    r = np.random.default_rng(0)
    a = r.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = r.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    c0 = r.standard_normal((m, n)).astype(dtype)
    c = c0.copy().reshape(-1)
    ColumnMajorBlas().gemm(ta, tb, m, n, k, 0.5, a.reshape(-1), b.reshape(-1), 2.0, c)
    want = 0.5 * (a.T if ta else a) @ (b.T if tb else b) + 2.0 * c0
    np.testing.assert_allclose(c.reshape(m, n), want, rtol=1e-5)


def test_gemm_args_swap_operands_and_dimensions():
    assert cublas.gemm_args(False, False, 3, 5, 4) == (cublas.OP_N, cublas.OP_N, 5, 3, 4, 5, 4, 5)
    assert cublas.gemm_args(True, False, 3, 5, 4) == (cublas.OP_N, cublas.OP_T, 5, 3, 4, 5, 3, 5)
    assert cublas.gemm_args(False, True, 3, 5, 4) == (cublas.OP_T, cublas.OP_N, 5, 3, 4, 4, 4, 5)


@pytest.mark.parametrize("trans", [False, True])
def test_row_major_gemv(trans):
    m, n = 4, 3
    r = np.random.default_rng(1)
    a = r.standard_normal((m, n))
    x = r.standard_normal(m if trans else n)
    y0 = r.standard_normal(n if trans else m)
    y = y0.copy()
    ColumnMajorBlas().gemv(trans, m, n, 2.0, a.reshape(-1), x, 0.5, y)
    np.testing.assert_allclose(y, 2.0 * (a.T if trans else a) @ x + 0.5 * y0)


def test_column_major_emulation_checks_leading_dimensions():
    with pytest.raises(cublas.CublasError) as e:
        ColumnMajorBlas.matrix(np.zeros(12), 4, 3, 3)
    assert e.value.name == "CUBLAS_STATUS_INVALID_VALUE"


def test_status_codes_are_named_errors():
    e = cublas.CublasError(13, "cublasSgemm_v2")
    assert e.name == "CUBLAS_STATUS_EXECUTION_FAILED" and "cublasSgemm_v2" in str(e)
    assert isinstance(e, CaffeError)
    with pytest.raises(cublas.CublasError):
        cublas.check(7, "x")
    cublas.check(0, "x")


# -- library discovery -------------------------------------------------------------------------
def test_discovery_order_env_wheel_system(tmp_path):
    lib = tmp_path / "site" / "nvidia" / "cublas" / "lib"
    lib.mkdir(parents=True)
    for name in ("libcublas.so.11", "libcublas.so.12"):
        (lib / name).write_text("")
    cands = cublas.candidate_paths(environ={"CAFFEPY_CUBLAS": "/opt/my/libcublas.so"},
                                   search_paths=[str(tmp_path / "site")],
                                   find_library=lambda name: "libcublas.so.99")
    assert cands[0] == "/opt/my/libcublas.so"
    assert cands[1:3] == [str(lib / "libcublas.so.12"), str(lib / "libcublas.so.11")]
    assert cands[3] == "libcublas.so.99"
    assert cands[4:] == list(cublas.SYSTEM_NAMES)


def test_discovery_without_env_or_wheel():
    cands = cublas.candidate_paths(environ={}, search_paths=[], find_library=lambda n: None)
    assert cands == list(cublas.SYSTEM_NAMES)


def test_load_library_takes_the_first_that_loads_and_reports_all_failures():
    def loader(path):
        if path == "good":
            return "LIB"
        raise OSError("%s: cannot open shared object file" % path)
    assert cublas.load_library(["bad", "good", "other"], loader=loader) == ("LIB", "good")
    with pytest.raises(cublas.CublasNotFound) as e:
        cublas.load_library(["a", "b"], loader=loader)
    msg = str(e.value)
    assert "\n" not in msg and "a (" in msg and "b (" in msg and "CAFFEPY_CUBLAS" in msg


# -- kernels: signatures, cache, launch --------------------------------------------------------
def test_kernel_signatures_parsed_from_source():
    src = ("__global__ void k1(const int n, const Dtype* __restrict__ x, Dtype* y, const Dtype a,\n"
           "    int* mask, const unsigned int seed) {}\n__device__ void helper(int q) {}")
    assert kernels.kernel_signatures(src, np.float32) == {"k1": "iPPfPI"}
    assert kernels.kernel_signatures(src, np.float64) == {"k1": "iPPdPI"}


def test_translation_unit_types_everything_by_dtype():
    kernels.register_source("test_tu", "__global__ void t(const int n, Dtype* y) {}")
    f32 = kernels.translation_unit("test_tu", np.float32)
    f64 = kernels.translation_unit("test_tu", np.float64)
    assert "typedef float Dtype;" in f32 and "typedef double Dtype;" in f64
    assert 'extern "C" {' in f64 and "CUDA_KERNEL_LOOP" in f64
    with pytest.raises(CaffeError):
        kernels.translation_unit("test_tu", np.float16)


def test_kernel_cache_compiles_once_per_context_family_dtype():
    seen = []
    cache = kernels.KernelCache(lambda text: seen.append(text) or len(seen))
    kernels.load_all_sources()
    a = cache.module("ctx0", "util", np.float32)
    assert cache.module("ctx0", "util", np.float32) == a
    cache.module("ctx0", "util", np.float64)
    cache.module("ctx1", "util", np.float32)
    assert cache.compiles == 3
    assert kernels.KernelCache.key("c", "util", np.dtype("float32")) == ("c", "util", "float32")
    with pytest.raises(CaffeError):
        cache.module("ctx0", "no_such_family", np.float32)


@pytest.mark.parametrize("n, blocks", [(1, 1), (512, 1), (513, 2), (512 * 65535, 65535),
                                       (512 * 65535 + 1, 65535)])
def test_launch_config(n, blocks):
    grid, block = kernels.launch_config(n)
    assert grid == (blocks, 1, 1) and block == (kernels.THREADS, 1, 1)


def test_launch_config_limits():
    assert kernels.launch_config(0) is None
    with pytest.raises(CaffeError):
        kernels.launch_config(2 ** 31)
    with pytest.raises(CaffeError):
        kernels.launch_config(-1)


def test_convert_args_by_codes():
    x = np.zeros(3, np.float32)
    out = kernels.convert_args("iPfdI", (3, x, np.float32(0.1), 0.1, 7))
    assert out == [3, x.ctypes.data, float(np.float32(0.1)), 0.1, 7]
    # packed as the device launcher packs them: the C types' bytes, float rounded as np.float32
    packed = struct.Struct("iPfdI").pack(*kernels.convert_args("iPfdI", (3, x, 0.1, 0.1, 7)))
    want = (np.int32(3).tobytes() + b"\0" * 4 + np.uint64(x.ctypes.data).tobytes()
            + np.float32(0.1).tobytes() + b"\0" * 4 + np.float64(0.1).tobytes()
            + np.uint32(7).tobytes())
    assert packed == want
    with pytest.raises(CaffeError):
        kernels.convert_args("iP", (1,))


# -- the blob mirror state machine -------------------------------------------------------------
class FakeDevice(object):
    def __init__(self):
        self.log = []

    def alloc(self, count, dtype):
        self.log.append("alloc")
        return np.full(count, np.nan, dtype=dtype)

    def upload(self, host, dev):
        self.log.append("up")
        dev[...] = host

    def download(self, dev, host):
        self.log.append("down")
        host[...] = dev


@pytest.fixture
def fake():
    dev = FakeDevice()
    old = blob_mod._backend[0]
    blob_mod.set_device_backend(dev)
    yield dev
    blob_mod.set_device_backend(old)


def test_synced_memory_copies_only_when_the_other_side_is_newer(fake):
    b = Blob((2, 3))
    b.data[...] = 1
    assert type(b) is Blob and b._mem is None
    g = b.gpu_data
    assert type(b) is SyncedBlob and fake.log == ["alloc", "up"]   # the diff: not yet
    assert b._mem[0].head == SYNCED and np.all(g == 1)
    b.gpu_data                                    # no copy: both sides current
    assert fake.log == ["alloc", "up"]
    b.mutable_gpu_data[...] = 5                   # device newer
    assert b._mem[0].head == DEVICE
    assert np.all(b.cpu_data == 5) and b._mem[0].head == SYNCED
    assert fake.log == ["alloc", "up", "down"]
    b.data[0, 0] = 7                              # host accessor: host newer
    assert b._mem[0].head == HOST
    assert b.gpu_data[0] == 7 and fake.log[-1] == "up"
    b.mutable_gpu_diff[...] = 2
    assert b.asum_diff() == 12 and fake.log[-1] == "down"


def test_shared_blobs_share_one_mirror(fake):
    a = Blob((2, 2))
    b = Blob((4,))
    b.share_data(a)
    a.mutable_gpu_data[...] = 3                   # a becomes mirrored...
    c = Blob((4,))
    c.share_data(a)                               # ... and so does any blob sharing with it
    assert type(c) is SyncedBlob and c._mem[0] is a._mem[0]
    assert np.all(c.data == 3)
    assert b.gpu_data is a._mem[0].dev            # b (shared before mirroring) finds the same one


def test_reshape_to_a_new_count_rebinds_the_mirror(fake):
    b = Blob((2, 3))
    b.mutable_gpu_data[...] = 1
    mem = b._mem[0]
    b.reshape((3, 2))
    assert b._mem[0] is mem                       # same memory, new shape
    b.reshape((4, 4))
    assert b._mem[0] is not mem and b._mem[0].host.size == 16 and b._mem[0].head == HOST


def test_cpu_path_blob_accessors_are_untouched():
    for prop in (Blob.data, Blob.diff):      # a plain Blob's accessors never look at the mirror
        assert prop.fget.__code__.co_names == ("_data",) or prop.fget.__code__.co_names == ("_diff",)


# -- Philox ------------------------------------------------------------------------------------
def test_philox_known_answers():
    # Random123 kat_vectors, philox4x32_10
    cases = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
             ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
             ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
              (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for ctr, key, want in cases:
        assert tuple(int(v) for v in random.philox4x32([ctr], key)[0]) == want


def test_reference_uniform_in_open_unit_interval():
    u = random.reference_uniform(10000, seed=123)
    assert 0 < u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.02


# -- lazy import and the one-line error --------------------------------------------------------
def _run(code):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT)


def test_cpu_path_never_imports_pycuda_or_the_gpu_package():
    r = _run("import sys, numpy as np, caffepy\n"
             "from caffepy.testing import make_layer, make_blobs, run_layer\n"
             "run_layer(make_layer('type: \"ReLU\"'), make_blobs([np.ones(3)]), make_blobs(1))\n"
             "print('pycuda' in sys.modules, 'caffepy.gpu' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


def test_gpu_mode_without_pycuda_fails_with_one_line_naming_the_fix():
    r = _run("import sys\n"
             "sys.modules['pycuda'] = None\n"            # make 'import pycuda' fail here
             "import caffepy, numpy as np\n"
             "from caffepy.gpu import GpuUnavailableError\n"
             "caffepy.set_mode_gpu()\n"
             "try:\n"
             "    caffepy.Net(\"\"\"input: 'x' input_shape { dim: 1 dim: 2 }\n"
             "layer { name: 'r' type: 'ReLU' bottom: 'x' top: 'y' }\"\"\", caffepy.TEST)\n"
             "except GpuUnavailableError as e:\n"
             "    print('ERR', e)\n")
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip()
    assert line.startswith("ERR GPU mode needs pycuda") and "\n" not in line
    assert "pip install 'caffepy[gpu]'" in line and "set_mode_cpu" in line
