"""Convolution through oneDNN (caffepy.math.onednn, caffepy.layers.conv_onednn) against the
im2col + GEMM path, a direct loop and the gradient checker. Skipped where oneDNN is not installed."""
import threading

import numpy as np
import pytest

from caffepy.layers import conv_onednn
from caffepy.math import onednn
from caffepy.testing import check_layer_gradient, make_blobs, make_layer
from tests.layers.test_conv import CONV, naive_conv

pytestmark = pytest.mark.skipif(
    not onednn.available(),
    reason="oneDNN is not installed (pip install caffepy[onednn]) or CAFFEPY_ONEDNN=0")



RULE = conv_onednn.MIN_CHANNEL_EFFICIENCY


@pytest.fixture(autouse=True)
def every_geometry(monkeypatch):
    """The comparisons run oneDNN on their small channel counts too, which the layers otherwise
    leave to the GEMM path (MIN_CHANNEL_EFFICIENCY)."""
    monkeypatch.setattr(conv_onednn, "MIN_CHANNEL_EFFICIENCY", 0.0)


GEOMETRIES = [
    ((2, 4, 7, 6), "kernel_size: 3", 3),
    ((2, 4, 7, 6), "kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0", 2),
    ((2, 4, 9, 8), "kernel_size: 3 dilation: 2 pad: 2 stride: 2 group: 2", 4),
    ((2, 4, 10, 9), "kernel_size: 3 stride: 2", 5),              # floor drops a row: pad_r < 0
    ((2, 4, 5, 6), "kernel_size: 1 bias_term: false", 5),
    ((3, 6, 8, 8), "kernel_size: 5 pad: 2 group: 3", 6),
    ((1, 2, 5, 4, 6), "kernel_size: 2 kernel_size: 3 kernel_size: 2 pad: 1 stride: 1", 3),
    ((2, 3, 11), "kernel_size: 4 stride: 3 pad: 1", 2),           # 1-d
    # the kernel overhangs the padded input by less than the stride: one output (Caffe's
    # truncating division), pad_r beyond pad
    ((2, 4, 2, 5), "kernel_h: 3 kernel_w: 4 stride: 2 pad_w: 1", 3),
    ((1, 2, 2, 3, 4), "kernel_size: 3 stride: 2", 3),
    ((2, 3, 3), "kernel_size: 5 stride: 3", 2),
]


def _pair(fields, num_output, x, kind="Convolution"):
    """The same float32 layer twice, set up for bottom ``x``: one runs oneDNN, one the GEMM path."""
    text = (CONV % (num_output, fields)).replace("Convolution", kind)
    a = make_layer(text, dtype=np.float32)
    b = make_layer(text, dtype=np.float32)
    for layer in (a, b):
        layer.setup(make_blobs([x], np.float32), make_blobs(1, np.float32))
    for pa, pb in zip(a.blobs, b.blobs):
        pb.data[...] = pa.data
    return a, b


def _run(layer, x, dy, onednn_on, pre=0.0, down=True):
    """forward + backward of ``layer`` with oneDNN on or off; diffs start at ``pre``."""
    onednn.set_enabled(onednn_on)
    try:
        bottom, top = make_blobs([x], np.float32), make_blobs(1, np.float32)
        layer.reshape(bottom, top)
        layer.forward(bottom, top)
        top[0].diff[...] = dy
        for blob in layer.blobs:
            blob.diff[...] = pre
        bottom[0].diff[...] = 7.0
        layer.backward(top, [down], bottom)
        return (top[0].data.copy(), bottom[0].diff.copy(),
                [blob.diff.copy() for blob in layer.blobs])
    finally:
        onednn.set_enabled(None)


@pytest.mark.parametrize("shape,fields,num_output", GEOMETRIES)
def test_onednn_matches_gemm_path_and_direct_loop(shape, fields, num_output):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    a, b = _pair(fields, num_output, x)
    ya, _, _ = _run(a, x, 0.0, True)
    assert a._dnnl_plans, "oneDNN took no plan for %s" % fields
    dy = rng.standard_normal(ya.shape).astype(np.float32)
    ya, dxa, pa = _run(a, x, dy, True, pre=0.5)
    yb, dxb, pb = _run(b, x, dy, False, pre=0.5)
    assert not getattr(b, "_dnnl_plans", None)
    bias = a.blobs[1].data if len(a.blobs) > 1 else None
    ref = naive_conv(x.astype(np.float64), a.blobs[0].data.astype(np.float64), bias,
                     a.stride, a.pad, a.dilation, a.group)
    np.testing.assert_allclose(ya, ref, rtol=1e-4, atol=1e-4)
    scale = lambda v: 1e-5 * max(1.0, float(np.abs(v).max()))     # noqa: E731
    np.testing.assert_allclose(ya, yb, rtol=0, atol=scale(yb))
    np.testing.assert_allclose(dxa, dxb, rtol=0, atol=scale(dxb))
    for ga, gb in zip(pa, pb):          # accumulated onto the 0.5 already there, like Caffe
        np.testing.assert_allclose(ga, gb, rtol=0, atol=scale(gb))


DECONV_GEOMETRIES = [
    ((2, 4, 5, 6), "kernel_size: 3", 3),
    ((2, 4, 5, 4), "kernel_size: 4 stride: 2 pad: 1 group: 2", 6),    # FCN-style upsampling
    ((2, 4, 4, 5), "kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 dilation: 2", 2),
    ((2, 3, 3, 4), "kernel_size: 2 stride: 2 bias_term: false", 4),
    ((1, 2, 3, 4, 3), "kernel_size: 3 stride: 2 pad: 1", 3),            # 3-d
]


@pytest.mark.parametrize("shape,fields,num_output", DECONV_GEOMETRIES)
def test_onednn_deconvolution_matches_gemm_path(shape, fields, num_output):
    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape).astype(np.float32)
    a, b = _pair(fields, num_output, x, "Deconvolution")
    ya, _, _ = _run(a, x, 0.0, True)
    assert a._dnnl_plans and all(a._dnnl_plans.values()), "oneDNN took no plan for %s" % fields
    dy = rng.standard_normal(ya.shape).astype(np.float32)
    ya, dxa, pa = _run(a, x, dy, True, pre=0.5)
    yb, dxb, pb = _run(b, x, dy, False, pre=0.5)
    scale = lambda v: 1e-5 * max(1.0, float(np.abs(v).max()))     # noqa: E731
    np.testing.assert_allclose(ya, yb, rtol=0, atol=scale(yb))
    np.testing.assert_allclose(dxa, dxb, rtol=0, atol=scale(dxb))
    for ga, gb in zip(pa, pb):
        np.testing.assert_allclose(ga, gb, rtol=0, atol=scale(gb))


@pytest.mark.parametrize("kind,fields", [
    ("Convolution", "kernel_size: 3 stride: 2 pad: 1 group: 2"),
    ("Convolution", "kernel_size: 2 dilation: 2"), ("Convolution", "kernel_size: 3 pad: 1"),
    ("Deconvolution", "kernel_size: 3 stride: 2 pad: 1 group: 2")])
def test_onednn_gradient(kind, fields):
    """Caffe's float tests: step 1e-2, threshold 1e-2."""
    x = np.random.default_rng(2).standard_normal((2, 4, 5, 4))
    layer = make_layer((CONV % (4, fields)).replace("Convolution", kind), dtype=np.float32)
    check_layer_gradient(layer, make_blobs([x], np.float32), make_blobs(1, np.float32),
                         stepsize=1e-2, threshold=1e-2)
    assert layer._dnnl_plans


def test_onednn_two_bottoms_and_propagate_flags():
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((2, 3, 6, 6)).astype(np.float32) for _ in range(2)]
    layer = make_layer(CONV % (2, "kernel_size: 3 pad: 1"), dtype=np.float32)
    check_layer_gradient(layer, make_blobs(xs, np.float32), make_blobs(2, np.float32),
                         stepsize=1e-2, threshold=1e-2)
    # no weight gradient: the bias gradient still accumulates; propagate_down false: dx untouched
    x = xs[0]
    a, b = _pair("kernel_size: 3 pad: 1", 2, x)
    for layer_ in (a, b):
        layer_.param_propagate_down = [False, True]
    dy = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    _, dxa, pa = _run(a, x, dy, True, pre=1.0, down=False)
    _, dxb, pb = _run(b, x, dy, False, pre=1.0, down=False)
    assert np.all(dxa == 7.0) and np.all(dxb == 7.0)
    assert np.all(pa[0] == 1.0)
    np.testing.assert_allclose(pa[1], pb[1], rtol=1e-5)
    assert not np.allclose(pa[1], 1.0)


def test_declined_geometry_falls_back_to_gemm(monkeypatch):
    def refuse(*args, **kwargs):
        raise onednn.OneDNNError("oneDNN: convolution forward failed (dnnl_status_t 3)")
    monkeypatch.setattr(onednn, "ConvPlan", refuse)
    x = np.random.default_rng(4).standard_normal((2, 3, 5, 5)).astype(np.float32)
    a, b = _pair("kernel_size: 3", 2, x)
    dy = np.ones((2, 2, 3, 3), np.float32)
    ya, dxa, _ = _run(a, x, dy, True)
    yb, dxb, _ = _run(b, x, dy, False)
    assert list(a._dnnl_plans.values()) == [None]
    np.testing.assert_array_equal(ya, yb)
    np.testing.assert_array_equal(dxa, dxb)


def test_float64_and_depthwise_keep_their_paths():
    layer = make_layer(CONV % (2, "kernel_size: 3"))                  # float64
    assert conv_onednn.plan(layer) is None
    dw = make_layer(CONV % (4, "kernel_size: 3 group: 4"), dtype=np.float32)
    dw.setup(make_blobs([np.zeros((1, 4, 5, 5))], np.float32), make_blobs(1, np.float32))
    assert dw._depthwise() == (conv_onednn.plan(dw) is None)


NET = """name: "n" force_backward: %s
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
"""


@pytest.mark.parametrize("train", [True, False])
def test_nets_use_onednn_only_where_they_train_the_layer(tmp_path, train):
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2
    path = tmp_path / "net.prototxt"
    path.write_text(NET % ("true" if train else "false"))
    net = Net(str(path), caffe_pb2.TRAIN if train else caffe_pb2.TEST)
    net.forward(data=np.ones((2, 3, 8, 8), np.float32))
    conv = net.layers[list(net._layer_names).index("conv")]
    assert bool(getattr(conv, "_dnnl_plans", None)) == train


@pytest.mark.parametrize("made_here", [False, True])
def test_threads_run_plans_at_once(made_here):
    """A stream per thread: workers of the in-process engine convolve at the same time; plans
    may run in threads other than the one that made them (each primitive has a scratchpad of
    its own: oneDNN's default one is per thread and shared by its primitives)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 8, 12, 12)).astype(np.float32)
    layers = [make_layer(CONV % (8, "kernel_size: 3 pad: 1"), dtype=np.float32)
              for _ in range(3)]
    want, got, errors = [], [None] * 3, []
    for layer in layers:
        bottom, top = make_blobs([x], np.float32), make_blobs(1, np.float32)
        layer.setup(bottom, top)
        want.append(naive_conv(x.astype(np.float64), layer.blobs[0].data.astype(np.float64),
                               layer.blobs[1].data, layer.stride, layer.pad, layer.dilation, 1))
        if made_here:
            layer.forward(bottom, top)          # the plan is made in this thread
    dy = rng.standard_normal(want[0].shape).astype(np.float32)
    want_dw = [np.tensordot(dy.astype(np.float64), np.stack(         # dW = sum dy * x windows
        [np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])[:, :, i:i + 12, j:j + 12]
         for i in range(3) for j in range(3)], axis=2), axes=([0, 2, 3], [0, 3, 4])).reshape(
        8, 8, 3, 3)] * 3

    def run(i):
        try:
            bottom, top = make_blobs([x], np.float32), make_blobs(1, np.float32)
            for _ in range(20):                 # backward too: its weight-gradient primitive
                layers[i].forward(bottom, top)  # has the largest scratchpad
                top[0].diff[...] = dy
                layers[i].blobs[0].diff[...] = 0
                layers[i].backward(top, [True], bottom)
            got[i] = (top[0].data.copy(), layers[i].blobs[0].diff.copy())
        except Exception as e:                  # reported below, in the main thread
            errors.append(e)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for (y, dw), w, w_dw in zip(got, want, want_dw):
        np.testing.assert_allclose(y, w, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(dw, w_dw, rtol=1e-4, atol=1e-3)


def test_worker_threads_follow_the_blas_budget(monkeypatch):
    """In-process dist workers compute at once: each one's oneDNN calls get the budget's threads."""
    from caffepy.math import blas
    for var in blas.USER_VARS:
        monkeypatch.delenv(var, raising=False)
    x = np.random.default_rng(7).standard_normal((2, 3, 6, 6)).astype(np.float32)
    layer = make_layer(CONV % (2, "kernel_size: 3"), dtype=np.float32)
    bottom, top = make_blobs([x], np.float32), make_blobs(1, np.float32)
    layer.setup(bottom, top)
    seen = []

    def work():
        layer.forward(bottom, top)
        seen.append(getattr(onednn._local, "threads", None))
    with blas.budget(4, ncores=4) as limit:
        t = threading.Thread(target=work)
        t.start()
        t.join(60)
    assert limit == 1 and seen == [1]


def test_plans_per_layer_stay_bounded_when_the_input_size_changes():
    layer = make_layer(CONV % (2, "kernel_size: 3"), dtype=np.float32)
    layer.setup(make_blobs([np.zeros((1, 3, 5, 5))], np.float32), make_blobs(1, np.float32))
    for size in range(5, 5 + 2 * conv_onednn.MAX_PLANS):
        x = np.ones((1, 3, size, size), np.float32)
        bottom, top = make_blobs([x], np.float32), make_blobs(1, np.float32)
        layer.reshape(bottom, top)
        layer.forward(bottom, top)
        np.testing.assert_allclose(top[0].data, naive_conv(
            x.astype(np.float64), layer.blobs[0].data.astype(np.float64), layer.blobs[1].data,
            layer.stride, layer.pad, layer.dilation, 1), rtol=1e-4, atol=1e-4)
    assert len(layer._dnnl_plans) == conv_onednn.MAX_PLANS
    assert (1, (size, size)) in layer._dnnl_plans


def test_parameter_gradients_are_summed_as_accurately_as_caffes_blas_path():
    """A 112 x 112 map (a face net's first layers): the bias gradient (and the weight gradient)
    of each path against float64. Caffe's GEMV against a ones vector is ~4e-7 from float64; the
    sum oneDNN's diff_bias does is 1.5e-3 away on such maps, so caffepy never uses it."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 3, 112, 112)).astype(np.float32)
    dy = rng.uniform(0.5, 1.5, (2, 8, 112, 112)).astype(np.float32)   # one sign: errors add up
    a, b = _pair("kernel_size: 3 pad: 1", 8, x)
    want_db = dy.astype(np.float64).sum(axis=(0, 2, 3))
    cols = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want_dw = np.zeros((8, 3, 3, 3))
    for i in range(3):
        for j in range(3):
            want_dw[:, :, i, j] = np.einsum("nmhw,nchw->mc", dy, cols[:, :, i:i + 112, j:j + 112])
    for layer, on in ((a, True), (b, False)):
        _, _, (dw, db) = _run(layer, x, dy, on)
        assert np.max(np.abs(db - want_db) / np.abs(want_db)) < 4.4e-7, on     # Caffe: 4.4e-7
        assert np.max(np.abs(dw - want_dw)) / np.max(np.abs(want_dw)) < 2e-5, on


# The share of real channels in oneDNN's padded blocks: 16-float blocks (AVX-512), 8-float (AVX2)
BLOCK_SHARES = {(20, 50): {16: 20 / 32 * 50 / 64, 8: 20 / 24 * 50 / 56}}


@pytest.mark.parametrize("channels, num_output", [(20, 50), (32, 50), (1, 20), (64, 64)])
def test_padded_channel_blocks_leave_the_layer_to_gemm(channels, num_output, monkeypatch):
    """A geometry whose channels fill too little of 16-float channel blocks runs the GEMM path on
    every ISA (LeNet's conv2, 20 -> 50: 0.49 of them; AVX2's own 8-float blocks would give 0.74);
    the same output either way. The share of the machine's own blocks (oneDNN picks the width by
    ISA) is read from the plan and, for LeNet's conv2, checked against the two widths'
    arithmetic."""
    monkeypatch.setattr(conv_onednn, "MIN_CHANNEL_EFFICIENCY", RULE)
    x = np.random.default_rng(2).standard_normal((4, channels, 12, 12)).astype(np.float32)
    a, b = _pair("kernel_size: 5", num_output, x)
    dy = np.random.default_rng(3).standard_normal((4, num_output, 8, 8)).astype(np.float32)
    got, want = _run(a, x, dy, True), _run(b, x, dy, False)
    p = next(iter(getattr(a, "_dnnl_plans", {None: None}).values()))
    plan = onednn.ConvPlan(4, channels, (12, 12), num_output, (8, 8), 1, (5, 5), (1, 1),
                           (0, 0), (1, 1), True)
    own, sixteen = plan.channel_efficiency(), plan.channel_efficiency(16)
    share = min(own, sixteen)
    if channels == 1:           # a one-channel source under a 5x5 kernel: GEMM by its own rule
        share = 0.0
    if (channels, num_output) in BLOCK_SHARES:
        widths = BLOCK_SHARES[(channels, num_output)]
        assert abs(own - widths[onednn.channel_block()]) < 1e-9, own    # the machine's width
        assert abs(sixteen - widths[16]) < 1e-9
        assert p is None                   # LeNet's conv2 on the GEMM path, 8- or 16-float blocks
    assert (p is None) == (share < RULE)
    for g, w in zip(list(got[:2]) + got[2], list(want[:2]) + want[2]):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(w).max()))


@pytest.mark.parametrize("kernel, on", [(5, False), (4, False), (3, True)])
def test_one_channel_sources_under_large_kernels_run_the_gemm_path(kernel, on):
    """A gray image's first convolution (one input channel) with a kernel of 16 positions or
    more leaves oneDNN (its weight gradient from a one-channel source is the slower one there);
    a 3x3 keeps it. The same values either way."""
    x = np.random.default_rng(4).standard_normal((4, 1, 14, 14)).astype(np.float32)
    a, b = _pair("kernel_size: %d" % kernel, 20, x)
    out = 14 - kernel + 1
    dy = np.random.default_rng(5).standard_normal((4, 20, out, out)).astype(np.float32)
    got, want = _run(a, x, dy, True), _run(b, x, dy, False)
    assert (conv_onednn.plan(a) is not None) == on
    for g, w in zip(list(got[:2]) + got[2], list(want[:2]) + want[2]):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(w).max()))


def test_weight_gradient_adds_from_blocked_format_onto_the_diff():
    """Where oneDNN's weight gradient is blocked, one reorder with a sum post-op adds it onto the
    parameter diff (Caffe accumulates): equal to the GEMM path's on a diff that starts nonzero,
    and twice the gradient after a second backward."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 32, 8, 8)).astype(np.float32)
    a, b = _pair("kernel_size: 3 pad: 1", 32, x)
    ya, _, _ = _run(a, x, 0.0, True)
    (plan,) = [p for p in a._dnnl_plans.values()]
    assert not plan.dw.same, "oneDNN chose plain weights here: the test needs blocked ones"
    dy = rng.standard_normal(ya.shape).astype(np.float32)
    _, _, pa = _run(a, x, dy, True, pre=0.5)
    _, _, pb = _run(b, x, dy, False, pre=0.5)
    np.testing.assert_allclose(pa[0], pb[0], rtol=0, atol=1e-5 * float(np.abs(pb[0]).max()))
    bottom, top = make_blobs([x], np.float32), make_blobs(1, np.float32)
    a.reshape(bottom, top)
    a.forward(bottom, top)
    top[0].diff[...] = dy
    a.blobs[0].diff[...] = 0.0
    a.backward(top, [False], bottom)
    once = a.blobs[0].diff.copy()
    a.backward(top, [False], bottom)
    np.testing.assert_allclose(a.blobs[0].diff, 2 * once, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape,fields,plain", [
    ((2, 8, 14, 15), "kernel_size: 1", True),
    ((2, 8, 16, 14), "kernel_size: 1 stride: 2 bias_term: false", True),
    ((2, 8, 7, 7), "kernel_size: 1", False),            # small planes: blocked formats
    ((2, 8, 14, 14), "kernel_size: 1 pad: 1", False),
    ((2, 8, 14, 14), "kernel_size: 3 pad: 1", False),
    # more than 4 input channels a position: blocked with AVX2's 8-float blocks only
    ((2, 1000, 14, 14), "kernel_size: 1", "avx512"),
    ((2, 780, 14, 14), "kernel_size: 1", True)])
def test_large_1x1_convolutions_run_in_caffes_layout(shape, fields, plain):
    """1x1 convolutions over planes of PLAIN_1X1_MIN_POSITIONS or more read and write NCHW
    blobs directly (no reorders), except, with AVX2's 8-float blocks, where the input has more
    than PLAIN_1X1_MAX_CHANNELS_PER_POSITION_AVX2 channels a position; the same results as the
    GEMM path either way."""
    if plain == "avx512":
        plain = onednn.channel_block() == 16
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    a, b = _pair(fields, 12, x)
    ya, _, _ = _run(a, x, 0.0, True)
    (plan,) = a._dnnl_plans.values()
    assert conv_onednn._plain(a) == plain
    if plain:
        assert plan.fx.same and plan.fy.same and plan.dx.same and plan.dy_w.same and plan.bx.same
    dy = rng.standard_normal(ya.shape).astype(np.float32)
    ya, dxa, pa = _run(a, x, dy, True, pre=0.5)
    yb, dxb, pb = _run(b, x, dy, False, pre=0.5)
    for got, want in zip([ya, dxa] + pa, [yb, dxb] + pb):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * max(1.0, np.abs(want).max()))
