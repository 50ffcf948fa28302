"""Every BVLC Caffe oracle case in ../shared/caffe-reference, run through caffepy's layer registry.

``test_layer`` (every case in index.json) builds the layer ``L`` alone: bottoms from the recorded
data (``bottom:`` for net inputs, ``top:`` for blobs made by helper layers), params from
weights.caffemodel; it compares every top, then sets the top diffs Caffe saw (``topdiff:`` under
force_backward, ``diff:`` in the "loss" cases), runs backward with Caffe's propagate_down (force_backward:
``allow_force_backward``; otherwise every bottom that is not a net input) and compares the bottom and
parameter diffs. ``test_net`` (the "loss" cases) builds the whole little net with caffepy.net.Net
(helper Scale layers, a loss) and compares every blob, diff and parameter diff. A case that needs a
layer type nobody has registered yet is an expected failure, so it starts checking as soon as the
layer lands.
"""
import json
import os

import numpy as np
import pytest

from caffepy.blob import Blob, blobproto_shape
from caffepy.layers import create_layer, layer_type_list
from caffepy.proto import caffe_pb2
from caffepy.proto.io import read_binary, read_net
from tests.conftest import SHARED, shared_path

REF = os.path.join(SHARED, "caffe-reference")
FWD_TOL = dict(rtol=1e-4, atol=1e-5)   # float32 forward; atol is relative to max |reference|
BWD_TOL = dict(rtol=5e-4, atol=5e-5)   # backward sums more terms


def _index():
    try:
        with open(os.path.join(REF, "index.json")) as f:
            return json.load(f)
    except OSError:
        return None


def _params(whole_net):
    """One pytest.param per case; xfail when a needed layer type is not registered yet."""
    index = _index()
    if index is None:
        return [pytest.param(None, None, id="no-shared-data")]
    known = set(layer_type_list())
    out = []
    for name in sorted(index):
        if whole_net and index[name]["backward"] != "loss":
            continue
        net = read_net(os.path.join(REF, name, "net.prototxt"))
        needed = {lp.type for lp in net.layer if whole_net or lp.name == "L"}
        missing = sorted(needed - known)
        marks = [pytest.mark.xfail(reason="layer %s not implemented" % ", ".join(missing),
                                   strict=False)] if missing else []
        out.append(pytest.param(name, index[name], id=name, marks=marks))
    return out


def _close(what, got, want, tol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, "%s: shape %s, Caffe %s" % (what, got.shape, want.shape)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=tol["rtol"], atol=tol["atol"] * scale,
                               err_msg=what)


def _load(case):
    d = shared_path("caffe-reference", case)
    net = read_net(os.path.join(d, "net.prototxt"))
    weights = read_binary(os.path.join(d, "weights.caffemodel"), caffe_pb2.NetParameter())
    with np.load(os.path.join(d, "data.npz")) as z:
        data = {k: z[k] for k in z.files}
    return d, net, weights, data


def _blob(array):
    b = Blob(array.shape, dtype=np.float32)
    b.data[...] = array
    return b


def _run_layer(meta, net, weights, data):
    phase = caffe_pb2.TRAIN if meta["phase"] == "TRAIN" else caffe_pb2.TEST
    lp = next(l for l in net.layer if l.name == "L")
    layer = create_layer(lp, phase=phase, dtype=np.float32)
    bottom = [_blob(data.get("bottom:" + name, data.get("top:" + name))) for name in lp.bottom]
    top = [Blob((), dtype=np.float32) for _ in lp.top]
    layer.setup(bottom, top)
    stored = next((l.blobs for l in weights.layer if l.name == "L"), [])
    assert len(layer.blobs) == len(stored), \
        "%d param blobs, Caffe has %d" % (len(layer.blobs), len(stored))
    for i, (blob, bp) in enumerate(zip(layer.blobs, stored)):
        assert blob.shape == tuple(blobproto_shape(bp)), \
            "param %d shape %s, Caffe %s" % (i, blob.shape, tuple(blobproto_shape(bp)))
        blob.from_proto(bp, reshape=False)
    layer.forward(bottom, top)
    for name, t in zip(lp.top, top):
        _close("top %s" % name, t.data, data["top:" + name], FWD_TOL)
    if phase == caffe_pb2.TEST:  # a TRAIN forward may update stored statistics (BatchNorm)
        for i, blob in enumerate(layer.blobs):
            _close("param %d" % i, blob.data, data["param:L:%d" % i], FWD_TOL)
    if not meta["backward"]:
        return
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
        _close("diff of bottom %s" % name, b.diff, data["diff:" + name], BWD_TOL)
    for i, blob in enumerate(layer.blobs):
        _close("diff of param %d" % i, blob.diff, data["paramdiff:L:%d" % i], BWD_TOL)


def _run_net(case_dir, meta, data):
    from caffepy.net import Net
    phase = caffe_pb2.TRAIN if meta["phase"] == "TRAIN" else caffe_pb2.TEST
    net = Net(os.path.join(case_dir, "net.prototxt"), phase)
    net.copy_from(os.path.join(case_dir, "weights.caffemodel"))
    for key, value in data.items():
        if key.startswith("bottom:"):
            net.blobs[key[7:]].data[...] = value
    net.forward()
    for key, value in data.items():
        if key.startswith("top:"):
            _close(key, net.blobs[key[4:]].data, value, FWD_TOL)
    net.clear_param_diffs()
    net.backward()
    for key, value in data.items():
        kind, _, rest = key.partition(":")
        if kind == "diff":
            _close(key, net.blobs[rest].diff, value, BWD_TOL)
        elif kind == "paramdiff":
            lname, i = rest.rsplit(":", 1)
            _close(key, net.params[lname][int(i)].diff, value, BWD_TOL)


@pytest.mark.parametrize("case,meta", _params(whole_net=False))
def test_layer(case, meta):
    if case is None:
        pytest.skip("needs ../shared/caffe-reference/index.json")
    _, net, weights, data = _load(case)
    _run_layer(meta, net, weights, data)


@pytest.mark.parametrize("case,meta", _params(whole_net=True))
def test_net(case, meta):
    if case is None:
        pytest.skip("needs ../shared/caffe-reference/index.json")
    case_dir, _, _, data = _load(case)
    _run_net(case_dir, meta, data)


def test_every_case_is_listed():
    """index.json and the case folders agree, so no case is silently left out."""
    with open(shared_path("caffe-reference", "index.json")) as f:
        index = json.load(f)
    dirs = {d for d in os.listdir(REF) if os.path.isfile(os.path.join(REF, d, "data.npz"))}
    assert dirs == set(index)
