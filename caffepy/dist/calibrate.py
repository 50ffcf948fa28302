"""Measuring the inputs of the performance model (:mod:`caffepy.dist.plan`) on this machine.

Three kinds of constants, each measured, none assumed:

- **compute**: every layer's forward and backward time of a net's TRAIN pass at two batches
  (the loop of ``caffepy time``: one warm-up pass, then ``iters`` passes layer by layer; the median
  per layer of the computing thread's CPU time, which other processes on the machine do not
  inflate), and the spread of whole passes (``cv``: 1.4826 x the median absolute deviation / the
  median of the pass times at the larger batch, a standard deviation that a burst of outside load
  does not move; a net timed over fewer than ``MIN_PASSES`` passes takes the median spread of the
  nets that were). :func:`trainable` turns a deploy net into the net that is timed.
- **arrays**: the server's per-slice work as ``t(n) = a + c n`` for n elements of float32, fitted
  through two sizes (4 Ki and 1 Mi elements, best of several runs): ``update`` (the solver's
  regularize + update rule + apply, :func:`caffepy.dist.sparse.step_array`, SGD with momentum and
  weight decay unless a solver is given), ``add`` (``a += b``: the stub's and server's sums),
  ``copy`` (SSP's pushed copies).
- **local**: one in-process message (``Endpoint.send`` → ``recv`` through an
  :class:`~caffepy.dist.inproc.InprocEngine` between two threads of a process on one core): the
  process's CPU time over a ping-pong, per message.

Run it in a process pinned to one core with one BLAS / OpenMP / numba thread (the benchmark's
``ONE_THREAD`` environment, set before numpy is imported): that is one rank of
``benchmarks/bench_scaling.py``. ``benchmarks/bench_plan.py calibrate`` does so and writes the JSON
file the model reads (layout: :class:`Costs`).
"""
import json
import statistics
import threading
import time

import numpy as np

from ..errors import CaffeError

MIN_PASSES = 10         # passes behind a net's own spread (fewer: the machine's, from other nets)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "NUMBA_NUM_THREADS": "1"}


def trainable(net_param, batch):
    """The TRAIN net of ``net_param`` at ``batch``: data layers become Input layers of that batch
    (:func:`caffepy.zoo.replace_data_layers`); Input layers take the batch; a net without a loss (a
    deploy net) has its last Softmax replaced by SoftmaxWithLoss against a ``label`` Input, and its
    BatchNorm layers compute batch statistics, as in training."""
    from ..proto import caffe_pb2
    from ..zoo import replace_data_layers
    out = replace_data_layers(net_param, batch_size=batch)
    for lp in out.layer:
        if lp.type == "Input":
            for shape in lp.input_param.shape:
                if len(shape.dim):
                    shape.dim[0] = batch
        if lp.type == "BatchNorm" and lp.batch_norm_param.HasField("use_global_stats"):
            lp.batch_norm_param.ClearField("use_global_stats")
    if any(lp.type.endswith("Loss") for lp in out.layer):
        return out
    last = [lp for lp in out.layer if lp.type == "Softmax"]
    if not last:
        return out
    lp = last[-1]
    lp.type = "SoftmaxWithLoss"
    lp.bottom.append("label")
    lp.ClearField("softmax_param")
    label = caffe_pb2.LayerParameter(name="label", type="Input", top=["label"])
    label.input_param.shape.add().dim.append(batch)
    layers = list(out.layer)
    del out.layer[:]
    out.layer.extend([label] + layers)
    return out


def net_batch(net_param):
    """A net's own batch: the first dimension of its first data or Input layer."""
    from ..zoo import replace_data_layers
    for lp in replace_data_layers(net_param).layer:
        if lp.type == "Input" and lp.input_param.shape and len(lp.input_param.shape[0].dim):
            return int(lp.input_param.shape[0].dim[0])
    raise CaffeError("net '%s' has no data or Input layer to take a batch from" % net_param.name)


def build_net(net_param, batch, filename=None):
    """The TRAIN net at ``batch`` (:func:`trainable`), built for its shapes only."""
    from ..layers.base import shapes_only
    from ..net import Net
    from ..proto import caffe_pb2
    with shapes_only():
        return Net(trainable(net_param, batch), phase=caffe_pb2.TRAIN, filename=filename)


def _fill_inputs(net, rng):
    from ..zoo.run import input_values
    for name in net.inputs if hasattr(net, "inputs") else ():
        blob = net.blobs[name]
        blob.data[...] = input_values(name, blob.shape, rng)
    for layer, top in zip(net.layers, net.top_vecs):
        if layer.type != "Input":
            continue
        for blob, name in zip(top, layer.layer_param.top):
            blob.data[...] = input_values(name, blob.shape, rng)


def time_layers(net, iters):
    """Per layer (forward s, backward s) medians over ``iters`` passes after one warm-up, and the
    pass times (the loop of ``caffepy time``), in CPU time of this thread: with one BLAS / OpenMP /
    numba thread all of a layer's work runs in it, and time other processes take on a shared
    machine does not count."""
    layers, n = net.layers, len(net.layers)
    clock = time.thread_time
    fwd, bwd = [[] for _ in range(n)], [[] for _ in range(n)]
    passes = []
    for it in range(iters + 1):
        f, b = [0.0] * n, [0.0] * n
        t_pass = clock()
        for i, layer in enumerate(layers):
            t = clock()
            layer.forward(net.bottom_vecs[i], net.top_vecs[i])
            f[i] = clock() - t
        for i in range(n - 1, -1, -1):
            if not net.layer_need_backward[i]:
                continue
            t = clock()
            layers[i].backward(net.top_vecs[i], net.bottom_need_backward[i], net.bottom_vecs[i])
            b[i] = clock() - t
        if it:
            passes.append(clock() - t_pass)
            for i in range(n):
                fwd[i].append(f[i])
                bwd[i].append(b[i])
    return [statistics.median(x) for x in fwd], [statistics.median(x) for x in bwd], passes


def measure_net(net_param, batches, iters):
    """The ``compute`` entry of one net: its layers' times at each of two batches."""
    from ..net import Net
    from ..proto import caffe_pb2
    rng = np.random.default_rng(0)
    out = {"batches": list(batches), "passes": iters, "cv": None, "layers": None}
    for k, batch in enumerate(batches):
        net = Net(trainable(net_param, batch), phase=caffe_pb2.TRAIN)
        _fill_inputs(net, rng)
        fwd, bwd, passes = time_layers(net, iters)
        if out["layers"] is None:
            out["layers"] = [[name, layer.type, [0.0] * len(batches), [0.0] * len(batches)]
                             for name, layer in zip(net._layer_names, net.layers)]
        for row, f, b in zip(out["layers"], fwd, bwd):
            row[2][k], row[3][k] = round(f, 7), round(b, 7)
        if len(passes) > 2:      # robust: 1.4826 MAD / median (a load burst is not the spread)
            mid = statistics.median(passes)
            out["cv"] = round(1.4826 * statistics.median(abs(x - mid) for x in passes) / mid, 4)
        del net
    return out


def _best(fn, reps):
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _fit(t_small, n_small, t_big, n_big):
    c = (t_big - t_small) / (n_big - n_small)
    return [max(0.0, t_small - c * n_small), c]


def measure_arrays(solver_param=None, sizes=(4096, 1 << 20), reps=15):
    """``{"update": [a, c], "add": [a, c], "copy": [a, c]}``: seconds for n float32 elements."""
    from ..proto import caffe_pb2, io as proto_io
    from ..solvers import solver_class
    from .sparse import step_array
    if solver_param is None:
        solver_param = caffe_pb2.SolverParameter()
        proto_io.parse_text('base_lr: 0.01 momentum: 0.9 weight_decay: 0.0005 lr_policy: "fixed"',
                            solver_param)
    cls = solver_class(solver_param.type or "SGD")
    times = {"update": [], "add": [], "copy": []}
    for n in sizes:
        rng = np.random.default_rng(0)
        w = rng.standard_normal(n).astype(np.float32)
        g = rng.standard_normal(n).astype(np.float32)
        hist = [np.zeros(n, np.float32) for _ in range(cls.n_history)]
        other = g.copy()

        def update():
            step_array(w, g, hist, cls.update_rule, solver_param, 0.01, 1.0, 1.0, 0)
        times["update"].append(_best(update, reps))
        times["add"].append(_best(lambda: g.__iadd__(other), reps))
        times["copy"].append(_best(g.copy, reps))
    return {k: [float("%.4g" % x) for x in _fit(v[0], sizes[0], v[1], sizes[1])]
            for k, v in times.items()}


def measure_local_message(reps=2000, size=64):
    """CPU seconds per in-process message between two threads (a ping-pong's, per message)."""
    from ..proto import caffe_pb2
    from . import transport as T
    from .inproc import InprocEngine
    from .topology import Topology
    cluster = caffe_pb2.ClusterParameter()
    cluster.nworker_groups = 2
    eng = InprocEngine(Topology(cluster, [1]))
    a, b = eng.endpoint(0), eng.endpoint(1)
    buf = np.zeros(size // 4, np.float32)

    def echo():
        for _ in range(reps + 10):
            h, bufs = b.recv(timeout=10)
            b.send(0, h, bufs)
    t = threading.Thread(target=echo, daemon=True)
    t.start()
    for i in range(10):                          # warm-up
        a.send(1, T.header(T.GRAD, param=0, step=i), [buf])
        a.recv(timeout=10)
    cpu = time.process_time()
    for i in range(reps):
        a.send(1, T.header(T.GRAD, param=0, step=i), [buf])
        a.recv(timeout=10)
    cpu = time.process_time() - cpu
    t.join(5)
    return float("%.4g" % (cpu / (2 * reps)))


class Costs(object):
    """The measured constants of a calibration file (layout: ``version``, ``how``, ``arrays``,
    ``messages`` {``local``, ``transport``}, ``compute`` {net name: {``batches``, ``cv``,
    ``layers``: [[name, type, [forward s per batch], [backward s per batch]]]}}, ``hosts``)."""

    def __init__(self, data, where="calibration"):
        self.where = where
        try:
            self.arrays = {k: _pair(data["arrays"][k]) for k in ("update", "add", "copy")}
            self.local = _seconds(data["messages"]["local"])
            self.msg, self.lat, self.byte, self.eta = fit_transport(data["messages"]["transport"])
            self.compute = {str(name): _net_entry(name, e) for name, e in data["compute"].items()}
            self.hosts = dict(data.get("hosts", {}))
        except KeyError as e:
            raise CaffeError("%s: not a calibration file (no %s)" % (where, e))
        except (TypeError, ValueError, AttributeError) as e:
            raise CaffeError("%s: not a calibration file (%s)" % (where, e))

    @classmethod
    def load(cls, path):
        try:
            with open(path) as f:
                data = json.load(f)
        except ValueError as e:
            raise CaffeError("%s: not JSON (%s)" % (path, e))
        return cls(data, path)

    def array(self, kind, n):
        a, c = self.arrays[kind]
        return a + c * n if n else 0.0

    def layer_times(self, net_name, names, batch, host=None):
        """Forward and backward seconds of each named layer at ``batch`` (affine in the batch
        through the two measured batches) and the spread of a pass. ``host``: a host profile,
        whose measured step scales the layers (their proportions stay this machine's) and whose
        own ``cv`` is the spread (none measured: 0)."""
        entry = self.compute.get(net_name)
        if entry is None:
            raise CaffeError("%s has no compute times for net '%s' (it has: %s; "
                             "benchmarks/bench_plan.py calibrate measures nets)"
                             % (self.where, net_name, ", ".join(sorted(self.compute)) or "none"))
        rows = {r[0]: r for r in entry["layers"]}
        b1, b2 = entry["batches"]

        def at(v):
            return max(0.0, v[0] + (v[1] - v[0]) * (batch - b1) / float(b2 - b1))
        fwd, bwd = [], []
        for name in names:
            if name not in rows:
                raise CaffeError("%s: net '%s' has no times for layer '%s'" % (self.where, net_name, name))
            fwd.append(at(rows[name][2]))
            bwd.append(at(rows[name][3]))
        scale = 1.0
        if host:
            ref = self.hosts.get(host, {}).get("nets", {}).get(net_name)
            if ref is None:
                raise CaffeError("%s has no measured step of net '%s' on host '%s'"
                                 % (self.where, net_name, host))
            b, per_s = _pair(ref)
            own = self.layer_times(net_name, names, b)
            scale = (b / float(per_s)) / (sum(own[0]) + sum(own[1]))
        cv = float(self.hosts[host].get("cv", 0.0)) if host else self.cv(net_name)
        return [f * scale for f in fwd], [x * scale for x in bwd], cv

    def cv(self, net_name):
        """A net's pass-to-pass spread: its own where measured over >= MIN_PASSES passes, else
        the median of those that were (the machine's spread, measured on the faster nets)."""
        entry = self.compute[net_name]
        if entry.get("passes", 0) >= MIN_PASSES or entry.get("cv") is None:
            return float(entry.get("cv") or 0.0)
        others = [float(e["cv"]) for e in self.compute.values()
                  if e.get("passes", 0) >= MIN_PASSES and e.get("cv") is not None]
        return statistics.median(others) if others else float(entry["cv"])


def _seconds(x):
    x = float(x)
    if not x >= 0 or x == float("inf"):
        raise ValueError("%r is not a time in seconds" % x)
    return x


def _pair(v):
    a, c = v
    return _seconds(a), _seconds(c)


def _net_entry(name, e):
    b1, b2 = (int(b) for b in e["batches"])
    if not 0 < b1 < b2:
        raise ValueError("net '%s': batches must be two increasing positive numbers" % name)
    for row in e["layers"]:
        if len(row) != 4 or len(row[2]) != 2 or len(row[3]) != 2:
            raise ValueError("net '%s': a layer row is [name, type, [2 forward s], [2 backward s]]" % name)
        [_seconds(x) for x in list(row[2]) + list(row[3])]
    return e


def fit_transport(t):
    """(c_msg, lam, c_byte, eta) from {``plain_64``: [[gbit, s]], ``engine_64``: [[gbit, s]],
    ``engine_large``: [[gbit, bytes, s]]} (one-way times; large messages at two rates or more)."""
    if len({r for r, _, _ in t["engine_large"]}) < 2:
        raise ValueError("transport: engine_large needs one-way times at two link rates")
    lam = sum(s for _, s in t["plain_64"]) / len(t["plain_64"])
    msg = (sum(s for _, s in t["engine_64"]) / len(t["engine_64"]) - lam) / 2.0
    slopes = {}
    for rate in sorted({r for r, _, _ in t["engine_large"]}):
        pts = sorted((n, s) for r, n, s in t["engine_large"] if r == rate)
        (n1, s1), (n2, s2) = pts[0], pts[-1]
        slopes[rate * 1e9] = (s2 - s1) / float(n2 - n1)
    (r1, s1), (r2, s2) = sorted(slopes.items())[:2]
    # s(R) = 2 c_byte + (8 / eta) / R: a line in 1 / R
    k = (s1 - s2) / (1.0 / r1 - 1.0 / r2)
    if not k > 0 or msg < 0:
        raise ValueError("transport: one-way times that do not fall with the rate or size")
    return msg, lam, max(0.0, (s1 - k / r1) / 2.0), 8.0 / k
