"""``caffepy device_query [--gpu ids|all]``: show diagnostic information for GPU devices, as Caffe's
``Caffe::DeviceQuery`` (all devices when ``--gpu`` is not given)."""
from ..log import info, setup as setup_log
from . import _flags, _gpu

NAME = "device_query"
HELP = "show GPU diagnostic information"


def add_arguments(parser):
    _flags.add_gpu(parser)


def run(args):
    setup_log()
    info("caffe.cpp:145", "Querying GPUs %s" % args.gpu)
    gpus = _gpu.parse_gpus(args.gpu or "all")
    for g in gpus:
        p = _gpu.properties(g)
        rows = [
            ("Device id", g), ("Major revision number", p["major"]),
            ("Minor revision number", p["minor"]), ("Name", p["name"]),
            ("Total global memory", p["total_global_mem"]),
            ("Total shared memory per block", p["shared_mem_per_block"]),
            ("Total registers per block", p["regs_per_block"]), ("Warp size", p["warp_size"]),
            ("Maximum memory pitch", p["mem_pitch"]),
            ("Maximum threads per block", p["max_threads_per_block"]),
            ("Maximum dimension of block", "%d, %d, %d" % (p["max_block_x"], p["max_block_y"],
                                                           p["max_block_z"])),
            ("Maximum dimension of grid", "%d, %d, %d" % (p["max_grid_x"], p["max_grid_y"],
                                                          p["max_grid_z"])),
            ("Clock rate", p["clock_rate"]), ("Total constant memory", p["total_const_mem"]),
            ("Texture alignment", p["texture_alignment"]),
            ("Concurrent copy and execution", "Yes" if p["device_overlap"] else "No"),
            ("Number of multiprocessors", p["multiprocessor_count"]),
            ("Kernel execution timeout", "Yes" if p["kernel_exec_timeout"] else "No"),
        ]
        for key, value in rows:
            info("common.cpp:173", "%-30s %s" % (key + ":", value))
    return 0
