"""Inference mode's forward-only kernels (depthwise convolution, LRN, MAX pooling) against a
numpy reference, and the forward pass split over the batch (caffepy.infer.shards) against
the exact path."""
import numpy as np
import pytest

from caffepy.math import kernels
from caffepy.math.sizes import conv_out_shape, overhangs
from caffepy.testing.random_weights import randomize

from .test_optimize import _compare, _net

pytestmark = pytest.mark.skipif(not kernels.available(), reason="numba not installed")


def _dw_reference(x, w, bias, k, pad, stride, dil, slope):
    """Direct loops over the taps in float64: y[n, m] = sum_ij w[m, 0, i, j] x[n, m // mult]."""
    n, c, h, wd = x.shape
    m = w.shape[0]
    (kh, kw), (ph, pw), (sh, sw), (dh, dw) = k, pad, stride, dil
    oh, ow = conv_out_shape((h, wd), k, pad, stride, dil)
    eh, ew = overhangs((h, wd), k, pad, stride, dil, (oh, ow))
    xp = np.zeros((n, c, h + 2 * ph + eh, wd + 2 * pw + ew))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    y = np.zeros((n, m, oh, ow)) + bias.reshape(1, m, 1, 1)
    for mi in range(m):
        src = xp[:, mi // (m // c)]
        for i in range(kh):
            for j in range(kw):
                y[:, mi] += w[mi, 0, i, j] * src[:, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                                                 j * dw:j * dw + (ow - 1) * sw + 1:sw]
    return np.where(y > 0, y, y * slope) if slope is not None else y


@pytest.mark.parametrize("k,pad,stride,dil,mult,shape", [
    ((3, 3), (1, 1), (1, 1), (1, 1), 1, (2, 3, 7, 5)),
    ((3, 3), (1, 1), (2, 2), (1, 1), 1, (1, 4, 9, 8)),      # stride 2, even width
    ((3, 2), (0, 1), (1, 2), (2, 1), 2, (3, 2, 8, 7)),      # rectangular, dilated, multiplier
    ((5, 5), (2, 2), (1, 1), (1, 1), 1, (2, 2, 1, 1)),      # 1x1 plane, all taps but one padding
    ((3, 3), (0, 0), (3, 3), (1, 1), 1, (1, 2, 10, 4)),     # no padding, stride 3
    ((3, 3), (0, 0), (2, 2), (1, 1), 1, (1, 2, 2, 4)),      # kernel past the input: 1 x 1 out
    ((2, 3), (1, 0), (3, 2), (2, 1), 2, (2, 2, 2, 2)),      # the same, dilated, multiplier
])
@pytest.mark.parametrize("slope", [None, 0.0, 0.1])
def test_depthwise_kernel_matches_the_direct_sum(k, pad, stride, dil, mult, shape, slope):
    from caffepy.infer import kernels as ik
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    c = shape[1]
    w = rng.standard_normal((c * mult, 1) + k).astype(np.float32)
    bias = rng.standard_normal(c * mult).astype(np.float32)
    want = _dw_reference(x, w, bias, k, pad, stride, dil, slope)
    y = np.full(want.shape, np.nan, np.float32)
    ik.dw_conv(x, w, bias, *k, *pad, *stride, *dil, slope or 0.0, slope is not None, y)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    y2 = np.full(want.shape, np.nan, np.float32)      # no bias: an empty array
    ik.dw_conv(x, w, np.empty(0, np.float32), *k, *pad, *stride, *dil, 0.0, False, y2)
    np.testing.assert_allclose(y2, _dw_reference(x, w, 0 * bias, k, pad, stride, dil, None),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("size,alpha,beta,k,channels", [
    (5, 1e-4, 0.75, 1.0, 7), (3, 0.5, 0.75, 2.0, 2), (5, 0.3, 0.6, 1.5, 9), (1, 1.0, 1.0, 1.0, 3)])
def test_lrn_kernel_matches_the_formula(size, alpha, beta, k, channels):
    from caffepy.infer import kernels as ik
    x = np.random.default_rng(1).standard_normal((2, channels, 5)).astype(np.float32) * 3
    half = (size - 1) // 2
    sq = np.pad(x.astype(np.float64) ** 2, ((0, 0), (half, half), (0, 0)))
    win = sum(sq[:, o:o + channels] for o in range(size))
    want = x * (k + alpha / size * win) ** -beta
    y = np.empty_like(x)
    ik.lrn_across(x, size, np.float32(alpha / size), beta, np.float32(k), y)
    np.testing.assert_allclose(y, want, rtol=2e-6)


INCEPTION = '''
name: "parts"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 5 dim: 3 dim: 12 dim: 11 } } }
layer { name: "conv0" type: "Convolution" bottom: "data" top: "c0"
  convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "relu0" type: "ReLU" bottom: "c0" top: "c0" }
layer { name: "norm" type: "LRN" bottom: "c0" top: "norm" lrn_param { local_size: 5 alpha: 0.5 beta: 0.75 } }
layer { name: "dw" type: "Convolution" bottom: "norm" top: "dw"
  convolution_param { num_output: 16 group: 8 kernel_size: 3 pad: 1 } }
layer { name: "bn" type: "BatchNorm" bottom: "dw" top: "dw" }
layer { name: "sc" type: "Scale" bottom: "dw" top: "dw" scale_param { bias_term: true } }
layer { name: "relu_dw" type: "ReLU" bottom: "dw" top: "dw" }
layer { name: "e1" type: "Convolution" bottom: "dw" top: "e1" convolution_param { num_output: 6 kernel_size: 1 } }
layer { name: "e3" type: "Convolution" bottom: "dw" top: "e3" convolution_param { num_output: 5 kernel_size: 3 pad: 1 } }
layer { name: "pb" type: "Pooling" bottom: "dw" top: "pb" pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }
layer { name: "cat" type: "Concat" bottom: "e1" bottom: "e3" bottom: "pb" top: "cat" }
layer { name: "ip" type: "InnerProduct" bottom: "cat" top: "ip" inner_product_param { num_output: 4 } }
layer { name: "relu_ip" type: "ReLU" bottom: "ip" top: "ip" }
layer { name: "e5" type: "Convolution" bottom: "dw" top: "e5" convolution_param { num_output: 3 kernel_size: 1 } }
layer { name: "e6" type: "Convolution" bottom: "dw" top: "e6" convolution_param { num_output: 3 kernel_size: 1 } }
layer { name: "res" type: "Eltwise" bottom: "e5" bottom: "e6" top: "res" eltwise_param { coeff: 1 coeff: -0.5 } }
layer { name: "relu_res" type: "ReLU" bottom: "res" top: "res" relu_param { negative_slope: 0.2 } }
layer { name: "ave" type: "Pooling" bottom: "res" top: "ave" pooling_param { pool: AVE global_pooling: true } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
'''


@pytest.mark.parametrize("parts", [2, 3])
def test_forward_split_over_the_batch_matches_the_exact_path(parts, monkeypatch):
    """Every step over 4-d batch blobs runs on its part of the images (convolutions with their
    own column buffers, depthwise, LRN, MAX / AVE pooling, the Concat's copy, an Eltwise SUM
    with coefficients and a fused ReLU); InnerProduct and Softmax run on the whole batch
    between the rounds of parts."""
    from caffepy.infer import shards as optimize_shards
    exact, fast = _compare(INCEPTION, keep=["ip", "ave"])
    plan = fast._plan
    segs = optimize_shards.segments(plan, parts)
    kinds = [seg[0] for seg in segs]
    assert kinds == ["all", "parts", "all", "parts", "all"]
    assert [len(r) for r in segs[1][1]] == [7] * parts       # conv0 .. cat (copying pb)
    assert optimize_shards.parts(5, parts)[-1] == (5 * (parts - 1) // parts, 5)
    x = np.random.default_rng(4).standard_normal(exact.blobs["data"].shape).astype(np.float32)
    want = exact.forward(data=x, blobs=["ip", "ave"])
    for name in ("ip", "ave", "prob"):
        fast.blobs[name].data[...] = np.nan
    fast.blobs["data"].data[...] = x
    optimize_shards.run_sharded(segs)
    for name in ("ip", "ave", "prob"):
        got = fast.blobs[name].data
        scale = np.abs(want[name]).max()
        assert np.abs(got - want[name]).max() <= 1e-5 * scale, name
    assert optimize_shards.segments(plan, parts) is segs              # built once per count
    _parts_share_no_memory(plan)
    import numba
    plan.segments = {}
    monkeypatch.setattr(numba, "threading_layer", lambda: "workqueue")   # unsafe from 2 threads
    assert optimize_shards.segments(plan, parts) is None
    monkeypatch.undo()
    single = _net(INCEPTION, batch=1)
    randomize(single)
    single.optimize(engine="caffepy")
    assert optimize_shards.segments(single._plan, 2) is None          # one image: no split


def test_forward_runs_the_split_when_it_has_been_fastest():
    """Net.forward goes through the thread choice: with the split setting the fastest so far,
    the pass runs on parts of the batch (one BLAS thread each) and gives the exact outputs."""
    from threadpoolctl import threadpool_info, threadpool_limits
    exact, fast = _compare(INCEPTION, keep=["ip"])
    x = np.random.default_rng(6).standard_normal(exact.blobs["data"].shape).astype(np.float32)
    want = exact.forward(data=x, blobs=["ip"])
    with threadpool_limits(2, user_api="blas"):
        if max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas") < 2:
            pytest.skip("BLAS runs one thread here")
        choice = fast._plan.threads
        choice.passes = 10
        choice.avg = {(2, 2, 1): 1.0, (2, 1, 1): 1.0, (1, 1, 1): 1.0, (1, 1, 2): 0.1}
        got = fast.forward(data=x, blobs=["ip"])
        assert choice.last == (1, 1, 2) and 2 in fast._plan.segments
    for name in ("ip", "prob"):
        scale = np.abs(want[name]).max()
        assert np.abs(got[name] - want[name]).max() <= 1e-5 * scale, name


WINO = '''
name: "wino"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 3 dim: 5 dim: 9 dim: 7 } } }
layer { name: "c1" type: "Convolution" bottom: "data" top: "c1"
  convolution_param { num_output: 6 kernel_size: 3 pad: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "c1" top: "c1" relu_param { negative_slope: 0.1 } }
layer { name: "c2" type: "Convolution" bottom: "c1" top: "c2"
  convolution_param { num_output: 4 kernel_size: 3 pad: 0 bias_term: false } }
layer { name: "c3" type: "Convolution" bottom: "c1" top: "c3"
  convolution_param { num_output: 5 kernel_size: 3 pad: 2 } }
layer { name: "relu3" type: "ReLU" bottom: "c3" top: "c3" }
layer { name: "c4" type: "Convolution" bottom: "c1" top: "c4"
  convolution_param { num_output: 3 kernel_size: 3 pad: 1 } }
layer { name: "cat" type: "Concat" bottom: "c4" bottom: "c1" top: "cat" }
layer { name: "ip2" type: "InnerProduct" bottom: "c2" top: "ip2" inner_product_param { num_output: 3 } }
layer { name: "ip3" type: "InnerProduct" bottom: "c3" top: "ip3" inner_product_param { num_output: 3 } }
layer { name: "ipc" type: "InnerProduct" bottom: "cat" top: "ipc" inner_product_param { num_output: 3 } }
'''


@pytest.mark.parametrize("chunk", [1 << 21, 1])
def test_winograd_convolutions_match_the_exact_path(chunk, monkeypatch):
    """3x3 convolutions by Winograd F(2x2, 3x3): odd and even planes (tiles cut at the edge),
    pad 0 / 1 / 2, no bias, fused leaky ReLU, into a Concat's slice, whole batch or one image
    per group; on the whole batch and on parts of it."""
    from caffepy.infer import shards as optimize_shards
    from caffepy.infer import winograd as optimize_winograd
    monkeypatch.setattr(optimize_winograd, "MIN_PLANE", 1)
    monkeypatch.setattr(optimize_winograd, "MIN_CHANNELS", 1)
    monkeypatch.setattr(optimize_winograd, "CHUNK", chunk)
    keep = ["ip2", "ip3", "ipc"]
    exact, fast = _compare(WINO, keep=keep)
    assert len(fast._plan.wino) == 4                       # every 3x3 ran through Winograd
    x = np.random.default_rng(2).standard_normal((3, 5, 9, 7)).astype(np.float32)
    want = exact.forward(data=x, blobs=keep)
    fast.blobs["data"].data[...] = x
    optimize_shards.run_sharded(optimize_shards.segments(fast._plan, 2))
    for name in keep:
        scale = np.abs(want[name]).max()
        assert np.abs(fast.blobs[name].data - want[name]).max() <= 1e-5 * scale, name


def _parts_share_no_memory(plan):
    views = [list(v.values()) for v in plan.part_views]
    for i in range(len(views)):
        for j in range(i + 1, len(views)):
            for a in views[i]:
                assert not any(np.shares_memory(a, b) for b in views[j])


@pytest.mark.parametrize("model", ["squeezenet1_1", pytest.param("googlenet", marks=pytest.mark.slow),
                                   pytest.param("resnet50", marks=pytest.mark.slow)])
def test_zoo_net_split_over_the_batch_matches_the_exact_path(model):
    """Blobs of different sizes share the net's buffers, so the parts, which run at once, each
    get memory of their own: no array of one part overlaps one of another, and the outputs
    of the split pass match the exact path (Concat elimination, Winograd, pooling, LRN)."""
    import os
    from caffepy.infer import shards as optimize_shards
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2
    from caffepy.testing.random_weights import logit_blobs
    from .test_optimize import MODELS
    path = os.path.join(MODELS, model, "%s_deploy.prototxt" % model)
    keep = logit_blobs(Net(path, caffe_pb2.TEST))
    exact, fast = _compare(path, keep=keep, batch=3)
    name = exact.inputs[0]
    x = np.random.default_rng(9).standard_normal(exact.blobs[name].shape).astype(np.float32)
    want = exact.forward(blobs=list(keep), **{name: x})
    fast.blobs[name].data[...] = x
    optimize_shards.run_sharded(optimize_shards.segments(fast._plan, 2))
    _parts_share_no_memory(fast._plan)
    for k in want:
        scale = np.abs(want[k]).max()
        assert np.abs(fast.blobs[k].data - want[k]).max() <= 1e-5 * scale, k


OVERHANG = '''
name: "overhang"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 3 dim: 4 dim: 5 dim: 6 } } }
layer { name: "c" type: "Convolution" bottom: "data" top: "c"
  convolution_param { num_output: 6 kernel_h: 6 kernel_w: 3 stride: 2 pad_w: 1 } }
layer { name: "dw" type: "Convolution" bottom: "data" top: "dw"
  convolution_param { num_output: 4 group: 4 kernel_h: 7 kernel_w: 3 stride_h: 3 stride_w: 3 } }
layer { name: "pm" type: "Pooling" bottom: "data" top: "pm" pooling_param { pool: MAX kernel_h: 6 kernel_w: 4 stride: 2 } }
layer { name: "pa" type: "Pooling" bottom: "data" top: "pa"
  pooling_param { pool: AVE kernel_h: 8 kernel_w: 3 stride_h: 3 stride_w: 2 pad_h: 1 pad_w: 1 } }
'''


def test_windows_past_the_input_match_the_exact_path():
    """Kernels that overhang the padded input by less than the stride (Caffe's truncating
    output size: one output row, its outside taps zero): the compiled im2col, depthwise and
    pooling steps give the layers' results."""
    exact, fast = _compare(OVERHANG, keep=["c", "dw", "pm", "pa"])
    assert exact.blobs["c"].shape == (3, 6, 1, 3)
    assert exact.blobs["dw"].shape == (3, 4, 1, 2)
    assert exact.blobs["pm"].shape == (3, 4, 1, 2)
    assert exact.blobs["pa"].shape == (3, 4, 1, 4)
