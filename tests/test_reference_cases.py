"""Every BVLC Caffe oracle case in ../shared/caffe-reference, run through caffepy's layer registry.

``test_layer`` (every case in index.json) builds the layer ``L`` alone: bottoms from the recorded
data (``bottom:`` for net inputs, ``top:`` for blobs made by helper layers), params from
weights.caffemodel; it compares every top, then sets the top diffs Caffe saw (``topdiff:`` under
force_backward, ``diff:`` in the "loss" cases), runs backward with Caffe's propagate_down (force_backward:
``allow_force_backward``; otherwise every bottom that is not a net input) and compares the bottom and
parameter diffs. ``test_net`` (the "loss" cases) builds the whole little net with caffepy.net.Net
(helper Scale layers, a loss) and compares every blob, diff and parameter diff. A case that needs a
layer type nobody has registered yet is an expected failure, so it starts checking as soon as the
layer lands. The loading and comparison live in caffepy.testing.oracle (REFERENCE tolerances).
"""
import json
import os

import numpy as np
import pytest

from caffepy.layers import layer_type_list
from caffepy.proto.io import read_net
from caffepy.testing.oracle import check_layer, check_net
from tests.conftest import SHARED, shared_path

REF = os.path.join(SHARED, "caffe-reference")


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


@pytest.mark.parametrize("case,meta", _params(whole_net=False))
def test_layer(case, meta):
    if case is None:
        pytest.skip("needs ../shared/caffe-reference/index.json")
    check_layer(shared_path("caffe-reference", case))


@pytest.mark.parametrize("case,meta", _params(whole_net=True))
def test_net(case, meta):
    if case is None:
        pytest.skip("needs ../shared/caffe-reference/index.json")
    check_net(shared_path("caffe-reference", case))


def test_every_case_is_listed():
    """index.json and the case folders agree, so no case is silently left out."""
    with open(shared_path("caffe-reference", "index.json")) as f:
        index = json.load(f)
    dirs = {d for d in os.listdir(REF) if os.path.isfile(os.path.join(REF, d, "data.npz"))}
    assert dirs == set(index)


#: Cases whose every top and diff caffepy's CPU path (numba on) gives byte for byte as BVLC
#: Caffe did. The rest differ in the last place where Caffe sums through its BLAS (convolution,
#: inner product, softmax's gemv, the sums of reductions, MVN, BatchNorm), in LSTM's own sigmoid,
#: or in LRN's backward.
BIT_EXACT = (
    "absval", "accuracy_top2", "argmax", "batch_reindex", "bnll", "clip", "concat_c", "concat_h",
    "crop", "dropout_test", "eltwise_max", "eltwise_prod", "eltwise_sum", "elu", "embed",
    "euclidean_loss", "exp", "filter", "flatten", "hinge_l1", "hinge_l2", "ip_axis2", "log",
    "multinomial_logistic", "parameter", "pool_ave", "pool_ave_pad", "pool_global",
    "pool_global_max", "pool_max", "pool_max_2tops", "pool_max_pad", "power", "reduction_mean",
    "relu", "relu_leaky", "reshape", "sigmoid", "sigmoid_ce_loss", "slice", "spp", "swish",
    "tanh", "threshold", "tile")


@pytest.mark.parametrize("case", BIT_EXACT)
def test_bit_exact_cases(case, monkeypatch):
    from caffepy.math import kernels
    from caffepy.testing import oracle
    if not os.path.isdir(os.path.join(REF, case)):
        pytest.skip("needs ../shared/caffe-reference")
    if not kernels.available():
        pytest.skip("numba not installed or off")
    compared = []
    real = oracle.assert_close

    def exact(what, got, want, tol):
        got, want = np.asarray(got), np.asarray(want)
        compared.append(what)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), \
            "%s: %d values differ from Caffe's" % (what, int((got != want).sum()))
        return real(what, got, want, tol)
    monkeypatch.setattr(oracle, "assert_close", exact)
    check_layer(shared_path("caffe-reference", case))
    assert compared
