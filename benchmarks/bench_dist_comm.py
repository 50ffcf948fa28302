"""Communication benchmarks of caffepy.dist: wait-free backprop, SFB bytes, sharded embedding lookups.

    python benchmarks/bench_dist_comm.py waitfree [--engine mpi|inproc] [--steps 30]
    python benchmarks/bench_dist_comm.py sfb [--workers 2 4 8]
    python benchmarks/bench_dist_comm.py embed

waitfree: an MLP shaped like CaffeNet's classifier (a small first layer, wide last layers), one
worker and one server (under mpiexec: separate processes, ``-n 2``; the script starts mpiexec
itself), float32, trained with wait-free backprop on and off (two runs each), with the forward+backward time
as the worker counts it (mean step: between the first and last data-layer forward; compute:
the worker's forward+backward time, waits excluded; the run with the fastest steps of each). Per step:
``exposed = step - compute``; hidden share of the communication
= ``1 - exposed(on) / exposed(off)`` (with off nothing overlaps, so exposed(off) is the whole
round trip: push, server update, pull). The workers' own wait counters give a second figure.

sfb: CaffeNet's fc6 (9216 -> 4096) and fc7 (4096 -> 4096) at batch 16 per worker, one real
forward/backward; bytes per worker per step counted from the real messages (serialized
DistHeader + buffers): dense = GRAD push + PARAM pull of weight and bias; SFB = the factor
message to each of the W - 1 other workers and theirs back, + the dense bias.

embed: lookups through sparse.SparseTableClient / TableShard (LOOKUP → ROWS, in one process:
the CPU cost of the sharded path, not the network) for 4096 ids a batch (uniform), 64 floats a
row, over table sizes and shard counts; plus the bytes one server holds.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from caffepy.proto import caffe_pb2, io as proto_io  # noqa: E402

WF_NET = """name: "classifier"
layer { name: "data" type: "MemoryData" top: "data" top: "label"
        memory_data_param { batch_size: %(batch)d channels: 256 height: 1 width: 1 } }
%(layers)s
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip%(last)d" bottom: "label" top: "loss" }
"""
WF_LAYER = """layer { name: "ip%(i)d" type: "InnerProduct" bottom: "%(bottom)s" top: "ip%(i)d"
        inner_product_param { num_output: %(n)d weight_filler { type: "gaussian" std: 0.01 } } }
"""
WF_WIDTHS = (512, 2048, 2048, 2048, 1000)


def wf_solver(batch, steps):
    layers, bottom = "", "data"
    for i, n in enumerate(WF_WIDTHS, 1):
        layers += WF_LAYER % {"i": i, "bottom": bottom, "n": n}
        if i < len(WF_WIDTHS):
            layers += 'layer { name: "relu%d" type: "ReLU" bottom: "ip%d" top: "ip%d" }\n' % (i, i, i)
        bottom = "ip%d" % i
    text = WF_NET % {"batch": batch, "layers": layers, "last": len(WF_WIDTHS)}
    param = caffe_pb2.SolverParameter()
    proto_io.parse_text('base_lr: 0.001 momentum: 0.9 lr_policy: "fixed" display: 0 '
                        'max_iter: %d random_seed: 1 snapshot_after_train: false' % steps, param)
    param.net_param.CopyFrom(proto_io.read_net(text))
    return param


def link_engine(gbps, latency=50e-6):
    """The inproc engine with an emulated network between processes: each process sends over its
    own link of ``gbps`` GB/s (messages queue behind each other) plus ``latency`` s; a transfer
    costs wall time, not the sender's CPU (as a NIC's DMA). Same-process messages stay immediate."""
    import heapq
    import threading
    from caffepy.dist.transport import Engine

    class LinkEngine(Engine):
        name = "inproc+link"

        def __init__(self, topo):
            super(LinkEngine, self).__init__(topo, range(topo.n_endpoints))
            self.heap, self.seq, self.free = [], 0, {}
            self.cv = threading.Condition()
            threading.Thread(target=self._pump, daemon=True).start()

        def deliver(self, h, buffers):
            src, dst = self.topology.process_of(h.src), self.topology.process_of(h.dst)
            if src == dst:
                return self.inboxes[h.dst].put((h, buffers))
            nbytes = h.ByteSize() + sum(int(b.nbytes) for b in buffers)
            with self.cv:
                start = max(time.time(), self.free.get(src, 0.0))
                self.free[src] = start + nbytes / (gbps * 1e9)
                self.seq += 1
                heapq.heappush(self.heap, (self.free[src] + latency, self.seq, h, buffers))
                self.cv.notify()

        def _pump(self):
            while True:
                with self.cv:
                    while not self.heap or self.heap[0][0] > time.time():
                        self.cv.wait(None if not self.heap else self.heap[0][0] - time.time())
                    _, _, h, buffers = heapq.heappop(self.heap)
                self.inboxes[h.dst].put((h, buffers))
    return LinkEngine


def wf_run(engine, wait_free, steps, batch, gbps=1.25):
    from caffepy import dist
    from caffepy.dist.waitfree import CommOptions
    from caffepy.solvers import get_solver
    solver = get_solver(wf_solver(batch, steps))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch * 4, 256, 1, 1)).astype(np.float32)
    y = rng.integers(0, 1000, size=batch * 4).astype(np.float32)
    cluster = caffe_pb2.ClusterParameter(nservers_per_group=1, server_worker_separate=True,
                                         engine="mpi" if engine == "mpi" else "inproc",
                                         workspace="/tmp/caffepy-bench-comm")
    if engine == "link":
        from caffepy.dist import inproc
        inproc_engine = inproc.InprocEngine
        inproc.InprocEngine = link_engine(gbps)
    stamps = []

    def feed(w, n, net):
        net.layers[0].reset(x, y)
        forward = net.layers[0].forward
        net.layers[0].forward = lambda *args: (stamps.append(time.time()), forward(*args))[1]
    try:
        result = dist.train(solver, cluster=cluster, comm=CommOptions(wait_free), feeder=feed)
    finally:
        if engine == "link":
            inproc.InprocEngine = inproc_engine
    if result is None:
        return None
    r = result.reports[0]
    step = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    return step, float(r["wait"]) / float(r["steps"]), float(r["compute"]) / float(r["steps"])


def bench_waitfree(a):
    if a.engine == "mpi" and "OMPI_COMM_WORLD_SIZE" not in os.environ and "PMI_SIZE" not in os.environ:
        cmd = ["mpiexec", "-n", "2", sys.executable, os.path.abspath(__file__), "waitfree",
               "--engine", "mpi", "--steps", str(a.steps), "--batch", str(a.batch),
               "--repeat", str(a.repeat)]
        return subprocess.run(cmd, check=True).returncode
    rows = {}
    for wait_free in (False, True) * a.repeat:
        out = wf_run(a.engine, wait_free, a.steps, a.batch, a.gbps)
        if out is None:
            continue
        rows.setdefault(wait_free, []).append(out)
        print("run: wait_free %s, ms/step %.1f, worker wait %.1f, compute %.1f"
              % (wait_free, 1e3 * out[0], 1e3 * out[1], 1e3 * out[2]), flush=True)
    if not rows:
        return 0
    best = {k: min(v) for k, v in rows.items()}
    exposed = {k: max(0.0, best[k][0] - best[k][2]) for k in best}
    print("engine %s%s, batch %d, %d steps, best of %d runs each"
          % (a.engine, " %.2f GB/s" % a.gbps if a.engine == "link" else "", a.batch, a.steps,
             len(rows[True])))
    print("| wait_free | ms/step | forward+backward ms/step | exposed communication ms/step | worker wait ms/step |")
    print("|---|---|---|---|---|")
    for k in (False, True):
        print("| %s | %.1f | %.1f | %.1f | %.1f |" % ("on" if k else "off", 1e3 * best[k][0],
                                                     1e3 * best[k][2], 1e3 * exposed[k], 1e3 * best[k][1]))
    print("hidden share: %.0f%% (step times), %.0f%% (worker wait counters)" % (
        100 * (1 - exposed[True] / exposed[False]), 100 * (1 - best[True][1] / best[False][1])))
    return 0


def msg_bytes(h, buffers):
    from caffepy.dist import transport as T
    h = T.describe_buffers(T._copy(h), [np.ascontiguousarray(b).reshape(-1) for b in buffers])
    return h.ByteSize() + sum(int(b.nbytes) for b in buffers)


FC_NET = """name: "caffenet_fc"
layer { name: "data" type: "Input" top: "pool5" top: "label"
        input_param { shape { dim: %(batch)d dim: 256 dim: 6 dim: 6 } shape { dim: %(batch)d } } }
layer { name: "fc6" type: "InnerProduct" bottom: "pool5" top: "fc6" inner_product_param { num_output: 4096
        weight_filler { type: "gaussian" std: 0.005 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu6" type: "ReLU" bottom: "fc6" top: "fc6" }
layer { name: "fc7" type: "InnerProduct" bottom: "fc6" top: "fc7" inner_product_param { num_output: 4096
        weight_filler { type: "gaussian" std: 0.005 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu7" type: "ReLU" bottom: "fc7" top: "fc7" }
layer { name: "fc8" type: "InnerProduct" bottom: "fc7" top: "fc8" inner_product_param { num_output: 1000
        weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc8" bottom: "label" top: "loss" }
"""


def bench_sfb(a):
    from caffepy.dist import sfb, transport as T
    from caffepy.net import Net
    net = Net(proto_io.read_net(FC_NET % {"batch": a.batch}), phase=caffe_pb2.TRAIN)
    rng = np.random.default_rng(0)
    net.blobs["pool5"].data[...] = np.maximum(rng.normal(size=net.blobs["pool5"].shape), 0)
    net.blobs["label"].data[...] = rng.integers(0, 1000, size=a.batch)
    layers = sfb.plan(net, {"fc6": True, "fc7": True, "fc8": False})
    col = sfb.FactorCollector(net, layers)
    net.clear_param_diffs()
    net.forward_backward()
    factors = col.take()
    print("batch %d per worker, float32; bytes per worker per step (sent + received)" % a.batch)
    print("| layer | workers | dense (GRAD push + PARAM pull) | SFB (factors to/from W-1 peers) + dense bias | ratio | rebuild ms |")
    print("|---|---|---|---|---|---|")
    for li, sl in sorted(layers.items()):
        name = net._layer_names[li]
        w, b = net.layers[li].blobs
        bias = 2 * msg_bytes(T.header(T.GRAD, param=sl.param + 1, step=1), [b.diff])
        dense = 2 * msg_bytes(T.header(T.GRAD, param=sl.param, step=1), [w.diff]) + bias
        h, bufs = sfb.message(sl.param, 1, 0, *factors[sl.param])
        one = msg_bytes(h, bufs)
        for W in a.workers:
            got = {k: factors[sl.param] for k in range(W)}
            t0 = time.time()
            sfb.rebuild(got, W)
            ms = 1e3 * (time.time() - t0)
            ours = 2 * (W - 1) * one + bias
            print("| %s (%dx%d) | %d | %d | %d | %.0fx | %.1f |" % (
                name, w.shape[0], w.shape[1], W, dense, ours, dense / float(ours), ms))
    return 0


def bench_embed(a):
    from caffepy.blob import Blob
    from caffepy.dist import sparse
    dim, n_ids = 64, 4096
    rng = np.random.default_rng(0)
    print("| rows | shards | lookups/s (ids) | ms per batch of %d ids | bytes held by one server |" % n_ids)
    print("|---|---|---|---|---|")
    for rows in (10 ** 4, 10 ** 5, 10 ** 6):
        table = rng.normal(size=(rows, dim)).astype(np.float32)
        blob = Blob((rows, dim), dtype=np.float32)
        for S in (1, 2, 4, 8):
            smap = sparse.ShardMap(rows, S)
            shards = [sparse.TableShard(smap, s, v) for s, v in enumerate(smap.scatter(table))]
            client = sparse.SparseTableClient(0, blob, list(range(S)))
            batches = [rng.integers(0, rows, size=n_ids) for _ in range(20)]
            t0 = time.time()
            for ids in batches:
                for dst, h, bufs in client.lookup_messages(ids, 0):
                    client.on_rows(*sparse.serve(shards[dst], h, bufs))
            dt = (time.time() - t0) / len(batches)
            np.testing.assert_array_equal(blob.data[batches[-1]], table[batches[-1]])
            print("| %d | %d | %.2e | %.2f | %d |" % (rows, S, n_ids / dt, 1e3 * dt,
                                                       shards[0].nbytes))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("part", choices=["waitfree", "sfb", "embed"])
    ap.add_argument("--engine", default="mpi", choices=["mpi", "inproc", "link"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gbps", type=float, default=1.25)
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4, 8])
    a = ap.parse_args()
    if a.part == "waitfree":
        a.batch = a.batch or 32
        return bench_waitfree(a)
    if a.part == "sfb":
        a.batch = a.batch or 16
        return bench_sfb(a)
    return bench_embed(a)


if __name__ == "__main__":
    sys.exit(main())
