"""bench_cpu.py's ``--profile``: caffepy's time per layer, forward and backward, the layers and
layer types that take the most, and the share of oneDNN's convolution primitives and of the
reorders into and out of their blocked formats."""
import collections
import contextlib
import time

import numpy as np


@contextlib.contextmanager
def onednn_split(seconds):
    """Inside: ``seconds`` (a Counter) adds the time of oneDNN's primitives ("primitives") and of
    the reorders between Caffe's layouts and theirs ("reorders": inputs, weights and gradients
    into the blocked formats, outputs and gradients back), wrapped around
    caffepy.math.onednn's ``_Primitive.run`` and ``_Layout`` methods for the block."""
    from caffepy.math import onednn
    wrapped = [(onednn._Primitive, "run", "primitives")] + [
        (onednn._Layout, m, "reorders") for m in ("to_inner", "to_plain", "add_to_plain")]
    saved = [(cls, name, getattr(cls, name)) for cls, name, _ in wrapped]

    def timed(fn, what):
        def call(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                seconds[what] += time.perf_counter() - t
        return call
    for (cls, name, what), (_, _, fn) in zip(wrapped, saved):
        setattr(cls, name, timed(fn, what))
    try:
        yield seconds
    finally:
        for cls, name, fn in saved:
            setattr(cls, name, fn)


def profile_caffepy(net, iters):
    n = len(net.layers)
    fwd, bwd = np.zeros(n), np.zeros(n)
    split = collections.Counter()
    with onednn_split(split):
        _profile_passes(net, iters, fwd, bwd)
    _print_profile(net, iters, fwd, bwd)
    total = 1e3 * (fwd.sum() + bwd.sum()) / iters
    if split:
        print("  oneDNN: " + ", ".join("%s %.1f ms (%.0f%%)" % (
            what, 1e3 * split[what] / iters, 1e5 * split[what] / iters / total)
            for what in ("primitives", "reorders")) + " of the %.1f ms" % total)


def _profile_passes(net, iters, fwd, bwd):
    n = len(net.layers)
    for _ in range(iters):
        for i in range(n):
            t = time.perf_counter()
            net.layers[i].forward(net.bottom_vecs[i], net.top_vecs[i])
            fwd[i] += time.perf_counter() - t
        for i in range(n - 1, -1, -1):
            if net.layer_need_backward[i]:
                t = time.perf_counter()
                net.layers[i].backward(net.top_vecs[i], net.bottom_need_backward[i],
                                       net.bottom_vecs[i])
                bwd[i] += time.perf_counter() - t


def _print_profile(net, iters, fwd, bwd):
    n = len(net.layers)
    fwd, bwd = 1e3 * fwd / iters, 1e3 * bwd / iters
    width = max(10, max(len(name) for name in net._layer_names))
    for i in range(n):
        print("    %-*s %-16s forward %7.2f ms  backward %7.2f ms"
              % (width, net._layer_names[i], net.layers[i].type, fwd[i], bwd[i]))
    total = fwd + bwd
    print("  sum %.1f ms (forward %.1f, backward %.1f); the most, forward + backward:"
          % (total.sum(), fwd.sum(), bwd.sum()))
    for i in np.argsort(-total)[:10]:
        print("    %-*s %-16s %7.2f ms (%4.1f%%)" % (width, net._layer_names[i],
                                                 net.layers[i].type, total[i],
                                                 100 * total[i] / total.sum()))
    by_type = {}
    for i in range(n):
        by_type[net.layers[i].type] = by_type.get(net.layers[i].type, 0.0) + total[i]
    print("  per layer type: " + ", ".join("%s %.1f" % kv for kv in
                                            sorted(by_type.items(), key=lambda kv: -kv[1])))
