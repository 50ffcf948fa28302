"""Training chains BatchNorm -> Scale (-> ReLU) run as one step (caffepy.net.fusion): the same
blobs, diffs, moving averages and parameter gradients as the layers run one by one, a
finite-difference check of the fused gradient, and the cases that must not fuse."""
import numpy as np
import pytest

from caffepy.math import kernels
from caffepy.net import Net
from caffepy.proto import caffe_pb2

needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba not installed or off")


def _net_text(bn_top="c", relu="relu", slope=0.0, bias=True, scale_lr=1, relu_in_place=True,
              scale_in_place=True, global_stats=None):
    gs = "" if global_stats is None else " batch_norm_param { use_global_stats: %s }" % (
        "true" if global_stats else "false")
    scale_top = bn_top if scale_in_place else "s"
    relu_top = scale_top if relu_in_place else "r"
    text = """
input: "x" input_shape { dim: 3 dim: 4 dim: 5 dim: 6 }
input: "t" input_shape { dim: 3 dim: 5 dim: 5 dim: 6 }
layer { name: "conv" type: "Convolution" bottom: "x" top: "c"
  convolution_param { num_output: 5 kernel_size: 3 pad: 1
    weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "constant" value: 0.2 } } }
layer { name: "bn" type: "BatchNorm" bottom: "c" top: "%s"%s }
layer { name: "scale" type: "Scale" bottom: "%s" top: "%s"
  param { lr_mult: %g }%s
  scale_param { bias_term: %s filler { type: "uniform" min: 0.5 max: 1.5 }
                bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
""" % (bn_top, gs, bn_top, scale_top, scale_lr, " param { lr_mult: 1 }" if bias else "",
       "true" if bias else "false")
    last = scale_top
    if relu:
        text += ('layer { name: "relu" type: "ReLU" bottom: "%s" top: "%s" '
                 'relu_param { negative_slope: %g } }\n' % (scale_top, relu_top, slope))
        last = relu_top
    text += ('layer { name: "loss" type: "EuclideanLoss" bottom: "%s" bottom: "t" top: "loss" }\n'
             % last)
    return text


def _net(tmp_path, dtype=np.float32, **kw):
    """The net with inputs and parameters drawn from a fixed seed (equal in every call)."""
    path = tmp_path / "net.prototxt"
    path.write_text(_net_text(**kw))
    net = Net(str(path), caffe_pb2.TRAIN, dtype=dtype)
    rng = np.random.default_rng(3)
    conv, scale = (net.layers[net._index(n)].blobs for n in ("conv", "scale"))
    for b in [net.blobs["x"], net.blobs["t"]] + conv + scale[1:]:
        b.data[...] = rng.standard_normal(b.shape)
    scale[0].data[...] = rng.uniform(0.5, 1.5, scale[0].shape)
    return net


def _step(net, fused_forward=True, fused_backward=True, start=None):
    """One forward + backward; returns every blob's data and diff and every param's data and
    diff (the moving averages are param blobs too)."""
    net.clear_param_diffs()
    net.fusion.enabled = fused_forward
    net.forward_from_to(0 if start is None else start)
    net.fusion.enabled = fused_backward
    net.backward_from_to()
    out = {}
    for name, b in net.blobs.items():
        out["data " + name], out["diff " + name] = b.data.copy(), b.diff.copy()
    for li, layer in enumerate(net.layers):
        for k, b in enumerate(layer.blobs):
            out["param %d.%d" % (li, k)] = b.data.copy()
            out["param diff %d.%d" % (li, k)] = b.diff.copy()
    return out


def _assert_same(a, b, tol):
    assert a.keys() == b.keys()
    for key in a:
        scale = max(float(np.abs(a[key]).max(initial=0)), 1.0)
        np.testing.assert_allclose(a[key], b[key], rtol=0, atol=tol * scale, err_msg=key)


VARIANTS = [dict(), dict(slope=0.1), dict(relu=None), dict(bias=False), dict(scale_lr=0),
            dict(bn_top="n"), dict(bn_top="n", relu=None)]


@needs_numba
@pytest.mark.parametrize("kw", VARIANTS, ids=lambda kw: ",".join("%s=%s" % i for i in kw.items())
                         or "default")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_chain_equals_the_layers(tmp_path, kw, dtype):
    tol = 2e-6 if dtype == np.float32 else 1e-13
    nets = [_net(tmp_path, dtype, **kw) for _ in range(2)]
    assert len(nets[0].fusion) == 1
    for _ in range(2):      # twice: the moving averages carry over
        fused, layers = _step(nets[0]), _step(nets[1], False, False)
        _assert_same(fused, layers, tol)


@needs_numba
def test_fused_and_layer_halves_mix(tmp_path):
    """A forward run one way and its backward the other leave the same state (a fused
    backward after a forward run layer by layer declines: the layers run it)."""
    ref = _step(_net(tmp_path), False, False)
    _assert_same(_step(_net(tmp_path), True, False), ref, 2e-6)
    _assert_same(_step(_net(tmp_path), False, True), ref, 2e-6)


@needs_numba
def test_fused_gradient_matches_finite_differences(tmp_path):
    net = _net(tmp_path, np.float64, slope=0.2)
    _step(net)
    # the conv's weights get their gradient through the whole chain (x itself gets none)
    blobs = [net.layers[net._index("conv")].blobs[0]] + net.layers[net._index("scale")].blobs
    analytic = [b.diff.copy() for b in blobs]
    rng = np.random.default_rng(5)
    for blob, grad in zip(blobs, analytic):
        flat = blob.data.reshape(-1)
        for i in rng.choice(flat.size, size=min(6, flat.size), replace=False):
            losses = []
            for h in (1e-5, -1e-5):
                old = flat[i]
                flat[i] = old + h
                losses.append(net.forward_from_to())
                flat[i] = old
            numeric = (losses[0] - losses[1]) / 2e-5
            assert abs(numeric - grad.reshape(-1)[i]) <= 1e-6 * max(1.0, abs(numeric)), (i, numeric)


@needs_numba
def test_a_run_from_inside_a_chain_runs_its_layers(tmp_path):
    net, ref = _net(tmp_path), _net(tmp_path)
    _step(net), _step(ref, False, False)
    got = _step(net, start=net._index("scale"))
    want = _step(ref, False, False, start=ref._index("scale"))
    _assert_same(got, want, 2e-6)


@needs_numba
def test_backward_callbacks_fire_for_every_layer_of_a_chain(tmp_path):
    net = _net(tmp_path)
    seen = []
    net.on_backward_layer.append(seen.append)
    _step(net)
    want = [i for i in range(len(net.layers) - 1, -1, -1) if net.layer_need_backward[i]]
    assert seen == want and {net._index(n) for n in ("bn", "scale", "relu")} <= set(seen)


@pytest.mark.parametrize("kw, chains, last", [
    (dict(), 1, "relu"), (dict(relu_in_place=False), 1, "scale"),
    (dict(scale_in_place=False), 0, None), (dict(global_stats=True), 1, "relu")])
def test_which_layers_form_a_chain(tmp_path, kw, chains, last):
    net = _net(tmp_path, **kw)
    assert len(net.fusion) == chains
    if chains:
        (chain,) = net.fusion.by_first.values()
        assert net._layer_names[chain.first] == "bn" and net._layer_names[chain.last] == last


@needs_numba
def test_global_statistics_run_the_layers(tmp_path):
    """use_global_stats: true is the layers' own path (the chain declines)."""
    net = _net(tmp_path, global_stats=True)
    (chain,) = net.fusion.by_first.values()
    assert not chain.forward() and not chain.backward()
    _assert_same(_step(net), _step(_net(tmp_path, global_stats=True), False, False), 0)


SUM_RELU = """
input: "a" input_shape { dim: 2 dim: 3 dim: 4 dim: 5 }
input: "b" input_shape { dim: 2 dim: 3 dim: 4 dim: 5 }
input: "t" input_shape { dim: 2 dim: 3 dim: 4 dim: 5 }
force_backward: %s
layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "s"%s }
layer { name: "relu" type: "ReLU" bottom: "s" top: "s" relu_param { negative_slope: %g } }
layer { name: "loss" type: "EuclideanLoss" bottom: "s" bottom: "t" top: "loss" }
"""
# the join's output read by more layers: the net splits it after the ReLU
CONSUMERS = """
layer { name: "p%d" type: "Power" bottom: "s" top: "p%d" power_param { scale: %g shift: 0.5 } }
layer { name: "loss%d" type: "EuclideanLoss" bottom: "p%d" bottom: "t" top: "loss%d" }
"""


def _sum_relu_net(tmp_path, slope=0.0, coeff="", force=True, more=0):
    path = tmp_path / "sum.prototxt"
    text = SUM_RELU % ("true" if force else "false", coeff, slope)
    path.write_text(text + "".join(CONSUMERS % (k, k, k + 2.0, k, k, k) for k in range(more)))
    net = Net(str(path), caffe_pb2.TRAIN)
    rng = np.random.default_rng(8)
    for name in "abt":
        net.blobs[name].data[...] = rng.standard_normal(net.blobs[name].shape)
    return net


@needs_numba
@pytest.mark.parametrize("slope", [0.0, 0.25])
@pytest.mark.parametrize("force", [True, False])
def test_sum_relu_chain_equals_the_layers_bit_for_bit(tmp_path, slope, force):
    nets = [_sum_relu_net(tmp_path, slope, force=force) for _ in range(2)]
    assert len(nets[0].fusion) == 1
    (chain,) = nets[0].fusion.by_first.values()
    assert (chain.first, chain.last) == (nets[0]._index("sum"), nets[0]._index("relu"))
    _assert_same(_step(nets[0]), _step(nets[1], False, False), 0)
    _assert_same(_step(nets[0], True, False), _step(nets[1], False, True), 0)


def test_sum_relu_needs_two_bottoms_with_unit_coefficients(tmp_path):
    assert len(_sum_relu_net(tmp_path, coeff=" eltwise_param { coeff: 1 coeff: -1 }").fusion) == 0


@needs_numba
@pytest.mark.parametrize("slope", [0.0, 0.25])
@pytest.mark.parametrize("force", [True, False])
def test_sum_relu_takes_in_the_split_after_it(tmp_path, slope, force):
    """A join read by two layers: the chain ends with the net's Split, whose two tops' diffs it
    sums in its backward; bit for bit the layers' results (every blob's data and diff)."""
    nets = [_sum_relu_net(tmp_path, slope, force=force, more=1) for _ in range(2)]
    (chain,) = nets[0].fusion.by_first.values()
    split = chain.last
    assert nets[0].layers[split].type == "Split" and len(nets[0].top_vecs[split]) == 2
    assert (chain.first, split) == (nets[0]._index("sum"), nets[0]._index("relu") + 1)
    _assert_same(_step(nets[0]), _step(nets[1], False, False), 0)
    _assert_same(_step(nets[0], True, False), _step(nets[1], False, True), 0)
    if force:       # without it no layer here needs a gradient: nothing runs backward
        assert float(np.abs(nets[0].blobs["s"].diff).max()) > 0
        assert float(np.abs(nets[0].blobs["a"].diff).max()) > 0
        assert chain.backward()         # the fused pass ran, not the layers


def test_a_split_into_three_stays_a_layer_of_its_own(tmp_path):
    net = _sum_relu_net(tmp_path, more=2)
    (chain,) = net.fusion.by_first.values()
    assert chain.last == net._index("relu") and chain.split is None
    assert net.layers[chain.last + 1].type == "Split"
