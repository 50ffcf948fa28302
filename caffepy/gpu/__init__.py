"""The GPU path: PyCUDA kernels and cuBLAS, imported only when GPU mode is asked for.

``activate()`` is called by the layer life cycle the first time a layer is set up (or run) in GPU
mode. It imports pycuda, retains the primary context of ``caffepy.common.device_id()`` (the
semantics of ``pycuda.autoprimaryctx``; library code never imports ``pycuda.autoinit``), installs
the device as the blobs' mirror backend (``caffepy.blob.set_device_backend``) and attaches the GPU
implementations of ``caffepy.gpu.layers`` to the layer classes. Without pycuda or a CUDA driver it
raises :class:`GpuUnavailableError`, one line naming the fix.

Importing this package does not import pycuda: the kernel sources, the launch arithmetic and the
cuBLAS argument mapping are plain Python (and are tested without a GPU).
"""
import threading

from ..errors import CaffeError

_FIX = ("install the GPU extra (pip install 'caffepy[gpu]', which needs the CUDA toolkit and an "
        "NVIDIA driver) or call caffepy.set_mode_cpu() / use solver_mode: CPU")


class GpuUnavailableError(CaffeError):
    """GPU mode was requested on a machine (or Python) that cannot run it."""


_lock = threading.Lock()
_active = {}          # device id -> caffepy.gpu.device.Device


def unavailable(reason):
    return GpuUnavailableError("GPU mode needs pycuda and a CUDA device (%s): %s" % (reason, _FIX))


def import_pycuda():
    """``pycuda.driver`` initialised, or GpuUnavailableError naming the fix."""
    try:
        import pycuda.driver as drv
    except ImportError as e:
        raise unavailable("import pycuda failed: %s" % e)
    try:
        drv.init()
        if drv.Device.count() == 0:
            raise unavailable("no CUDA device found")
    except drv.Error as e:
        raise unavailable("CUDA driver error: %s" % str(e).strip().splitlines()[0])
    return drv


def current(device_id=None):
    """The active device (:class:`caffepy.gpu.device.Device`), activating it if needed."""
    from .. import common
    did = common.device_id() if device_id is None else int(device_id)
    dev = _active.get(did)
    if dev is None:
        activate(did)
        dev = _active[did]
    dev.make_current()
    return dev


def activate(device_id=None):
    """Make GPU mode usable on ``device_id`` (default: ``caffepy.common.device_id()``). Idempotent."""
    from .. import common
    did = common.device_id() if device_id is None else int(device_id)
    if did in _active:
        return True
    with _lock:
        if did in _active:
            return True
        from .. import blob
        from .device import Device
        from .layers import attach_all
        dev = Device(did)
        blob.set_device_backend(dev)
        attach_all()
        _active[did] = dev
    return True


def install(dev, device_id=0):
    """Use ``dev`` (anything with the Device interface, e.g. the tests' emulator) as device
    ``device_id``: blob mirrors and the GPU layers then run on it."""
    from .. import blob
    from .layers import attach_all
    blob.set_device_backend(dev)
    attach_all()
    _active[int(device_id)] = dev


def uninstall(device_id=0):
    from .. import blob
    dev = _active.pop(int(device_id), None)
    if dev is not None and blob._backend[0] is dev:
        blob.set_device_backend(None)


def release_thread():
    """Pop the contexts this thread pushed (see ``caffepy.common.release_gpu_thread``)."""
    for dev in list(_active.values()):
        release = getattr(dev, "release_current", None)
        if release is not None:
            release()


def is_active():
    return bool(_active)


def synchronize():
    """Wait for the work queued on caffepy's stream (no-op when the GPU was never used)."""
    for dev in list(_active.values()):
        dev.synchronize()


def available():
    """True when GPU mode can be activated here (pycuda importable, a device present)."""
    try:
        import_pycuda()
    except GpuUnavailableError:
        return False
    return True
