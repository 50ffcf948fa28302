"""Achieved GFLOP/s and its share of this machine's peak, for the benchmark tables.

A net's forward FLOPs are ``caffepy summary``'s estimate (caffepy.zoo.summary.layer_flops: a
multiply-add is 2 FLOPs; convolution, InnerProduct, pooling, element-wise layers). A training
step (forward + backward) is counted as 3 x the forward FLOPs: the backward pass of a
convolution or InnerProduct is two products the size of its forward one (the gradient of the
data and of the weights); this is the usual convention, not a count of what each framework runs
(Caffe skips the data gradient of the first layer).

The peak is ``bench_peak.py``'s FMA-loop rate: the 1-thread figure for a 1-thread row, the
all-threads figure otherwise (a row with fewer threads than the machine's cores is compared with
``threads x`` the 1-thread figure). ``--peak-json FILE`` in the scripts reads a saved
``bench_peak.py --json`` result; without it the loop is timed once at the start (a few seconds).

    cell(gflop, ms, peak_rate)  ->  "123.4 (67%)"
    median_row(label, batch, threads, [ms per round], gflop, peak)  ->  a table row
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def forward_gflop(proto, phase=None):
    """Forward GFLOP of the net in ``proto`` (a path or NetParameter) at its declared shapes."""
    sys.path.insert(0, os.path.dirname(HERE))
    from caffepy.proto import caffe_pb2
    from caffepy.zoo.summary import summarize
    _, total = summarize(proto, phase=caffe_pb2.TEST if phase is None else phase)
    return total.flops / 1e9


def train_gflop(proto, phase=None):
    """One training step's GFLOP: 3 x the forward (module doc)."""
    sys.path.insert(0, os.path.dirname(HERE))
    from caffepy.proto import caffe_pb2
    return 3.0 * forward_gflop(proto, caffe_pb2.TRAIN if phase is None else phase)


def load_peak(path=None):
    """{"single": GFLOP/s, "all": GFLOP/s, "threads": n, ...}: from ``path`` (bench_peak.py
    --json) when given, else timed now."""
    if path:
        with open(path) as f:
            return json.load(f)
    sys.path.insert(0, HERE)
    import bench_peak
    return bench_peak.measure(repeats=3)


def peak_for(peak, threads):
    """The peak GFLOP/s a run on ``threads`` threads can reach."""
    if threads and threads < peak.get("threads", 1):
        return peak["single"] * threads
    return peak["all"] if threads != 1 else peak["single"]


def cell(gflop, ms, peak_rate):
    """'GFLOP/s (share of peak)' of ``gflop`` done in ``ms``; '-' without a time."""
    if ms is None or ms != ms or ms <= 0:
        return "-"
    rate = gflop / (ms / 1e3)
    return "%.1f (%.0f%%)" % (rate, 100.0 * rate / peak_rate)


def median_row(label, batch, threads, times, gflop, peak):
    """One markdown row of a per-process table: label, batch, threads, the median ms of
    ``times`` (one per round), every round, GFLOP and the median's cell against ``peak``."""
    import statistics
    med = statistics.median(times)
    return "| %s | %s | %d | %.1f | %s | %.2f | %s |" % (
        label, batch, threads, med, ", ".join("%.1f" % t for t in times), gflop,
        cell(gflop, med, peak_for(peak, threads)))


def describe(peak):
    return ("peak FP32 (bench_peak.py, FMA loop in %s): %.1f GFLOP/s on 1 thread, %.1f on %d"
            % (peak.get("register", "?"), peak["single"], peak["all"], peak.get("threads", 0)))
