"""Weights and checkpoint I/O: CaffeNet .caffemodel save / load, .solverstate, dist checkpoints.

    python benchmarks/bench_io.py                 # CaffeNet (244 MB) + a 3 x 5M-float checkpoint
    python benchmarks/bench_io.py --what caffemodel --repeat 3

Times the public calls (``Net.save``, ``Net.copy_from``, ``Net(proto, TEST, weights=...)``,
``solvers.state.write_state`` / ``read_state``, ``dist.checkpoint.write_file`` +
``write_manifest`` / ``full_params``) in a
temporary directory (``--dir``), best of ``--repeat``. Only the APIs of the previous release are
used, so the same script measures the old code (``PYTHONPATH=<old checkout>``).
"""
import argparse
import os
import shutil
import tempfile
import time

import numpy as np

CAFFENET = "models/bvlc_reference_caffenet/deploy.prototxt"


def _best(fn, repeat):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best


def bench_caffemodel(d, repeat):
    import caffepy
    from caffepy.solvers import state as state_io
    zoo = os.path.join(os.environ.get("CAFFEPY_SHARED", "../shared"), "modelzoo", "bvlc", CAFFENET)
    net = caffepy.Net(zoo, caffepy.TEST)
    rng = np.random.RandomState(0)
    for b in net.learnable_params:
        b.data[...] = rng.standard_normal(b.shape).astype(np.float32)
    path = os.path.join(d, "caffenet.caffemodel")
    save = _best(lambda: net.save(path), repeat)
    size = os.path.getsize(path)
    load = _best(lambda: net.copy_from(path), repeat)
    print("caffemodel CaffeNet %.0f MB: save %.2f s, load %.2f s" % (size / 1e6, save, load))
    build = _best(lambda: caffepy.Net(zoo, caffepy.TEST, weights=path), repeat)
    print("Net(deploy, TEST, weights=caffemodel) CaffeNet: %.2f s" % build)
    hist = [b.data.copy() for b in net.learnable_params]
    spath = os.path.join(d, "caffenet.solverstate")
    ssave = _best(lambda: state_io.write_state(spath, 1, path, 0, hist), repeat)
    sload = _best(lambda: state_io.read_state(spath), repeat)
    print("solverstate CaffeNet history %.0f MB: save %.2f s, load %.2f s"
          % (os.path.getsize(spath) / 1e6, ssave, sload))


def bench_checkpoint(d, repeat, floats):
    from caffepy.dist import checkpoint as ck
    rng = np.random.RandomState(0)
    values = rng.standard_normal(floats).astype(np.float32)
    hist = [rng.standard_normal(floats).astype(np.float32) for _ in range(2)]

    def write():
        s = ck.make_slice("w", 0, 0, 0, 1, values, hist)
        name = ck.write_file(d, 1, "server", 0, [s], 0, "SGD")
        ck.write_manifest(d, 1, [name], 0, "SGD", 1, 1)

    wt = _best(write, repeat)
    step, manifest = ck.latest_complete(d)
    rt = _best(lambda: ck.full_params(d, manifest, np.float32, "server"), repeat)
    mb = 3 * floats * 4 / 1e6
    print("checkpoint %d floats x 3 (%.0f MB): write %.2f s (%.0f MB/s), read %.2f s (%.0f MB/s)"
          % (floats, mb, wt, mb / wt, rt, mb / rt))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--what", choices=("all", "caffemodel", "checkpoint"), default="all")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--floats", type=int, default=5000000)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    d = tempfile.mkdtemp(dir=args.dir)
    try:
        if args.what in ("all", "caffemodel"):
            bench_caffemodel(d, args.repeat)
        if args.what in ("all", "checkpoint"):
            bench_checkpoint(d, args.repeat, args.floats)
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
