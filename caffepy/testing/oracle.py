"""Oracle comparisons with BVLC Caffe's recorded cases (../shared/caffe-reference).

A case folder holds ``net.prototxt`` (Input layers, the layer under test named ``L``, helper
layers), ``weights.caffemodel`` and ``data.npz`` (``bottom:``, ``top:``, ``topdiff:``, ``diff:``,
``param:L:<i>``, ``paramdiff:L:<i>``); the parent folder's ``index.json`` gives each case's phase
and whether backward ran (``true``: force_backward with recorded top diffs; ``"loss"``: from a loss
in the net; ``false``: none).

    check_layer(case_dir)             # layer L alone on Caffe's inputs and weights
    check_layer(case_dir, STRICT)     # with the layer tests' tighter, absolute tolerances
    check_net(case_dir)               # the whole little net ("loss" cases)
"""
import collections
import json
import os

import numpy as np

from ..blob import Blob, blobproto_shape
from ..layers.base import create_layer
from ..proto import caffe_pb2
from ..proto.io import read_binary, read_net


class Tolerance(collections.namedtuple("Tolerance", "rtol atol scaled")):
    """Within ``atol + rtol |want|``; atol is multiplied by max(1, max |want|) when ``scaled``."""


Tolerances = collections.namedtuple("Tolerances", "forward backward param_backward")

# float32 forward; backward sums more terms; atol relative to the largest reference value
REFERENCE = Tolerances(Tolerance(1e-4, 1e-5, True), Tolerance(5e-4, 5e-5, True),
                       Tolerance(5e-4, 5e-5, True))
# the layer tests' tolerances: tighter, absolute
STRICT = Tolerances(Tolerance(1e-5, 1e-5, False), Tolerance(1e-4, 1e-5, False),
                    Tolerance(1e-4, 1e-4, False))

Case = collections.namedtuple("Case", "dir name meta net weights data")


def load_case(case_dir):
    """Read a case folder: its NetParameter, weights, data arrays and index.json entry."""
    case_dir = os.path.normpath(case_dir)
    name = os.path.basename(case_dir)
    with open(os.path.join(case_dir, "..", "index.json")) as f:
        meta = json.load(f)[name]
    net = read_net(os.path.join(case_dir, "net.prototxt"))
    weights = read_binary(os.path.join(case_dir, "weights.caffemodel"), caffe_pb2.NetParameter())
    with np.load(os.path.join(case_dir, "data.npz")) as z:
        data = {k: z[k] for k in z.files}
    return Case(case_dir, name, meta, net, weights, data)


def assert_close(what, got, want, tol):
    """Shapes equal and values within ``tol`` (a Tolerance); the message names ``what``."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise AssertionError("%s: shape %s, Caffe %s" % (what, got.shape, want.shape))
    scale = max(1.0, float(np.abs(want).max())) if tol.scaled and want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=tol.rtol, atol=tol.atol * scale, err_msg=what)


def _phase(meta):
    return caffe_pb2.TRAIN if meta["phase"] == "TRAIN" else caffe_pb2.TEST


def _blob(array):
    b = Blob(array.shape, dtype=np.float32)
    b.data[...] = array
    return b


def check_layer(case_dir, tolerances=REFERENCE):
    """Run layer ``L`` alone on Caffe's inputs and weights; compare tops, params, diffs.

    Bottoms come from ``bottom:`` (net inputs) or ``top:`` (blobs made by helper layers); the
    parameter blobs must match Caffe's in number and shape. Backward uses Caffe's top diffs
    (``topdiff:`` under force_backward, ``diff:`` in the "loss" cases) and Caffe's propagate_down
    (``allow_force_backward``; otherwise every bottom that is not a net input). Returns the layer.
    """
    case = load_case(case_dir)
    meta, data = case.meta, case.data
    phase = _phase(meta)
    lp = next(l for l in case.net.layer if l.name == "L")
    layer = create_layer(lp, phase=phase, dtype=np.float32)
    bottom = [_blob(data.get("bottom:" + name, data.get("top:" + name))) for name in lp.bottom]
    top = [Blob((), dtype=np.float32) for _ in lp.top]
    layer.setup(bottom, top)
    stored = next((l.blobs for l in case.weights.layer if l.name == "L"), [])
    if len(layer.blobs) != len(stored):
        raise AssertionError("%d param blobs, Caffe has %d" % (len(layer.blobs), len(stored)))
    for i, (blob, bp) in enumerate(zip(layer.blobs, stored)):
        if blob.shape != tuple(blobproto_shape(bp)):
            raise AssertionError("param %d shape %s, Caffe %s"
                                 % (i, blob.shape, tuple(blobproto_shape(bp))))
        blob.from_proto(bp, reshape=False)
    layer.forward(bottom, top)
    for name, t in zip(lp.top, top):
        assert_close("top %s" % name, t.data, data["top:" + name], tolerances.forward)
    if phase == caffe_pb2.TEST:  # a TRAIN forward may update stored statistics (BatchNorm)
        for i, blob in enumerate(layer.blobs):
            assert_close("param %d" % i, blob.data, data["param:L:%d" % i], tolerances.forward)
    if not meta["backward"]:
        return layer
    forced = meta["backward"] is True
    for j, (name, t) in enumerate(zip(lp.top, top)):
        key = ("topdiff:" if forced else "diff:") + name
        t.diff[...] = data[key] if key in data else layer.loss(j)
    for b in bottom:
        b.diff[...] = 0
    for blob in layer.blobs:
        blob.diff[...] = 0
    layer.param_propagate_down = [True] * len(layer.blobs)
    if forced:
        propagate = [layer.allow_force_backward(i) for i in range(len(bottom))]
    else:
        propagate = ["bottom:" + name not in data for name in lp.bottom]
    layer.backward(top, propagate, bottom)
    for name, b in zip(lp.bottom, bottom):
        assert_close("diff of bottom %s" % name, b.diff, data["diff:" + name], tolerances.backward)
    for i, blob in enumerate(layer.blobs):
        assert_close("diff of param %d" % i, blob.diff, data["paramdiff:L:%d" % i],
                     tolerances.param_backward)
    return layer


def check_net(case_dir, tolerances=REFERENCE):
    """Build the case's whole net with caffepy.net.Net; compare every blob, diff and param diff."""
    from ..net import Net
    case = load_case(case_dir)
    net = Net(os.path.join(case.dir, "net.prototxt"), _phase(case.meta))
    net.copy_from(os.path.join(case.dir, "weights.caffemodel"))
    for key, value in case.data.items():
        if key.startswith("bottom:"):
            net.blobs[key[7:]].data[...] = value
    net.forward()
    for key, value in case.data.items():
        if key.startswith("top:"):
            assert_close(key, net.blobs[key[4:]].data, value, tolerances.forward)
    net.clear_param_diffs()
    net.backward()
    for key, value in case.data.items():
        kind, _, rest = key.partition(":")
        if kind == "diff":
            assert_close(key, net.blobs[rest].diff, value, tolerances.backward)
        elif kind == "paramdiff":
            lname, i = rest.rsplit(":", 1)
            assert_close(key, net.params[lname][int(i)].diff, value, tolerances.param_backward)
    return net
