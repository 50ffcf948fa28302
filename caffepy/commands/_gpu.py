"""GPU selection for the commands (``--gpu 0,1`` / ``--gpu all``) and device properties.

Devices are counted and described through the CUDA driver library (``libcuda``, via ctypes), so
the commands need neither pycuda nor a compiled extension; the CPU path never loads it.
"""
import ctypes
import ctypes.util

from .. import common
from ..log import info
from ..errors import CaffeError

# CUdevice_attribute values (cuda.h)
_ATTR = {"max_threads_per_block": 1, "max_block_x": 2, "max_block_y": 3, "max_block_z": 4,
         "max_grid_x": 5, "max_grid_y": 6, "max_grid_z": 7, "shared_mem_per_block": 8,
         "total_const_mem": 9, "warp_size": 10, "mem_pitch": 11, "regs_per_block": 12,
         "clock_rate": 13, "texture_alignment": 14, "device_overlap": 15,
         "multiprocessor_count": 16, "kernel_exec_timeout": 17, "major": 75, "minor": 76}

_driver = []


def _cuda():
    """The initialised driver library, or None when there is no NVIDIA driver."""
    if not _driver:
        lib = None
        for name in ("libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda")):
            if not name:
                continue
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if lib is not None and lib.cuInit(0) != 0:
            lib = None
        _driver.append(lib)
    return _driver[0]


def device_count():
    lib = _cuda()
    if lib is None:
        return 0
    n = ctypes.c_int(0)
    return n.value if lib.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0


def parse_gpus(flag):
    """``""`` → [], ``"all"`` → every device, ``"0,2"`` → [0, 2] (checked against the device count)."""
    if not flag:
        return []
    count = device_count()
    if flag == "all":
        if not count:
            raise CaffeError("--gpu all: no CUDA device found")
        return list(range(count))
    try:
        ids = [int(x) for x in flag.split(",")]
    except ValueError:
        raise CaffeError("--gpu must be 'all' or device ids separated by ',' (got '%s')" % flag)
    for i in ids:
        if not 0 <= i < count:
            raise CaffeError("--gpu %d: no such CUDA device (%d found)" % (i, count))
    return ids


def properties(device):
    """Caffe's DeviceQuery fields for one device, as a dict."""
    lib = _cuda()
    if lib is None:
        raise CaffeError("no CUDA driver (libcuda) found: this machine has no usable NVIDIA GPU")
    dev = ctypes.c_int()
    if lib.cuDeviceGet(ctypes.byref(dev), int(device)) != 0:
        raise CaffeError("CUDA device %d does not exist (%d found)" % (device, device_count()))
    out = {}
    for key, attr in _ATTR.items():
        v = ctypes.c_int()
        lib.cuDeviceGetAttribute(ctypes.byref(v), attr, dev)
        out[key] = v.value
    name = ctypes.create_string_buffer(256)
    lib.cuDeviceGetName(name, 256, dev)
    out["name"] = name.value.decode(errors="replace")
    mem = ctypes.c_size_t()
    lib.cuDeviceTotalMem_v2(ctypes.byref(mem), dev)
    out["total_global_mem"] = mem.value
    return out


def device_name(device):
    try:
        return properties(device)["name"]
    except CaffeError:
        return "?"


def use_devices(gpus, tag="caffe.cpp:204"):
    """Set the compute mode: CPU for no ids, else GPU on the first id (logged as Caffe does)."""
    if not gpus:
        info("caffe.cpp:220", "Use CPU.")
        common.set_mode_cpu()
        return
    info(tag, "Using GPUs %s" % ", ".join(str(g) for g in gpus))
    for g in gpus:
        info("caffe.cpp:209", "GPU %d: %s" % (g, device_name(g)))
    common.set_device(gpus[0])
    common.set_mode_gpu()


def single_device(args):
    """Caffe's test/time device choice: the first --gpu id (others dropped), else the CPU."""
    gpus = parse_gpus(args.gpu)
    while len(gpus) > 1:
        info("caffe.cpp:269", "Not using GPU #%d for single-GPU function" % gpus.pop())
    if gpus:
        info("caffe.cpp:275", "Use GPU with device ID %d" % gpus[0])
        info("caffe.cpp:278", "GPU device name: %s" % device_name(gpus[0]))
        common.set_device(gpus[0])
        common.set_mode_gpu()
    else:
        info("caffe.cpp:282", "Use CPU.")
        common.set_mode_cpu()
    return gpus
