"""GPU test fixtures: ``emulated`` (the CPU stand-in device; needs only a C++ compiler) and
``cuda`` (a real device through pycuda; tests using it are marked ``gpu`` and skip without one)."""
import numpy as np
import pytest

from caffepy import common, gpu
from caffepy import blob

from .emulator import EmulatedDevice, compiler

_EMU = []


@pytest.fixture
def emulated():
    if not compiler():
        pytest.skip("no C++ compiler (g++/c++) to build the kernels for the emulated device")
    if gpu.is_active() and not _EMU:
        pytest.skip("a real GPU is active in this process")
    if not _EMU:
        _EMU.append(EmulatedDevice())
    dev = _EMU[0]
    gpu.install(dev)
    yield dev
    common.set_mode_cpu()
    gpu.uninstall()


@pytest.fixture(scope="session")
def cuda_device():
    try:
        import pycuda.driver  # noqa: F401
    except ImportError:
        pytest.skip("needs pycuda (pip install 'caffepy[gpu]') and an NVIDIA GPU")
    if not gpu.available():
        pytest.skip("pycuda is installed but no CUDA device / driver is usable")
    gpu.activate(0)
    return gpu.current(0)


@pytest.fixture
def cuda(cuda_device):
    if isinstance(blob._backend[0], EmulatedDevice):
        pytest.skip("the emulated device is installed")
    blob.set_device_backend(cuda_device)
    yield cuda_device
    common.set_mode_cpu()


DTYPES = [np.float32, np.float64]
