"""caffepy.onnx: each converter against caffepy's forward in onnxruntime (<= 1e-4 relative),
names, the export command and its flags (its refusals and errors: test_onnx_refusals.py)."""
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from caffepy import onnx as caffe_onnx  # noqa: E402
from caffepy.net import Net  # noqa: E402
from caffepy.onnx.check import session  # noqa: E402
from caffepy.proto import caffe_pb2  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_net(body, shapes=("data", (2, 3, 7, 9)), phase=caffe_pb2.TEST, seed=0):
    """A TEST net: Input layers for ``shapes`` (name, shape pairs), then ``body``; every
    parameter blob random (BatchNorm: positive variances, factor 1)."""
    pairs = [shapes] if isinstance(shapes[0], str) else list(shapes)
    text = "".join('layer { name: "%s" type: "Input" top: "%s" input_param { shape { %s } } }\n'
                   % (n, n, " ".join("dim: %d" % d for d in s)) for n, s in pairs)
    net = Net(_parse(text + body), phase)
    rng = np.random.default_rng(seed)
    for layer in net.layers:
        for i, b in enumerate(layer.blobs):
            b.data[...] = rng.standard_normal(b.data.shape)
        if layer.layer_param.type == "BatchNorm":
            layer.blobs[1].data[...] = np.abs(layer.blobs[1].data) + 0.5
            layer.blobs[2].data[...] = 2.0
    return net


def _parse(text):
    from caffepy.proto import io as proto_io
    return proto_io.read_net(text)


def roundtrip(net, rtol=1e-4, **kw):
    model = caffe_onnx.to_model(net, **kw)
    errors = caffe_onnx.compare(net, model, seed=1)
    assert errors and max(errors.values()) <= rtol, errors
    return model


CASES = {
    # ChenglongChen/caffe-windows' BN without moving_average: the batch statistics in TEST
    "ewma_bn_batch_stats": 'layer { name: "b" type: "BN" bottom: "data" top: "b" '
    'bn_param { moving_average: false var_eps: 1e-5 } }',
    "conv_group_dilation": 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
    'convolution_param { num_output: 6 kernel_size: 3 group: 3 dilation: 2 pad: 1 stride: 2 } }',
    "conv_dilation_h_w": 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
    'convolution_param { num_output: 4 kernel_size: 3 dilation_h: 2 dilation_w: 1 pad: 1 } }',
    "conv_rect": 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param '
    '{ num_output: 4 kernel_h: 3 kernel_w: 2 pad_h: 1 pad_w: 0 stride_h: 1 stride_w: 2 } }',
    # 7 x 9 input: kernels that overhang the (padded) input by less than the stride give one
    # output row / column (Caffe's truncating division), exported with extra end padding
    "conv_overhang": 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
    'convolution_param { num_output: 4 kernel_h: 9 kernel_w: 10 stride_h: 3 stride_w: 2 } }',
    "depthwise": 'layer { name: "c" type: "ConvolutionDepthwise" bottom: "data" top: "c" '
    'convolution_param { num_output: 3 kernel_size: 3 pad: 1 bias_term: false } }',
    "deconv": 'layer { name: "d" type: "Deconvolution" bottom: "data" top: "d" '
    'convolution_param { num_output: 4 kernel_size: 4 stride: 2 pad: 1 group: 1 } }',
    "deconv_group": 'layer { name: "d" type: "Deconvolution" bottom: "data" top: "d" '
    'convolution_param { num_output: 6 kernel_size: 3 stride: 3 group: 3 dilation: 2 } }',
    "max_ceil": 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" '
    'pooling_param { pool: MAX kernel_size: 3 stride: 2 } }',
    "max_pad_clip": 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" '
    'pooling_param { pool: MAX kernel_size: 2 stride: 2 pad: 1 } }',
    "ave_pad_ceil": 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" '
    'pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }',
    "ave_clip": 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" '
    'pooling_param { pool: AVE kernel_size: 4 stride: 3 pad: 2 } }',
    "max_overhang": 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" '
    'pooling_param { pool: MAX kernel_size: 8 stride: 2 } }',
    "ave_overhang_pad": 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" '
    'pooling_param { pool: AVE kernel_h: 10 kernel_w: 3 stride_h: 3 stride_w: 2 pad_h: 1 '
    'pad_w: 0 } }',
    "ave_floor": 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" '
    'pooling_param { pool: AVE kernel_size: 3 stride: 2 round_mode: FLOOR } }',
    "max_mask": 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" top: "mask" '
    'pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 } }',
    "stochastic_test": 'layer { name: "r" type: "AbsVal" bottom: "data" top: "r" } '
    'layer { name: "p" type: "Pooling" bottom: "r" top: "p" '
    'pooling_param { pool: STOCHASTIC kernel_size: 3 stride: 2 } }',
    "global": 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" '
    'pooling_param { pool: AVE global_pooling: true } } layer { name: "q" type: "Pooling" '
    'bottom: "data" top: "q" pooling_param { pool: MAX global_pooling: true } }',
    "spp": 'layer { name: "s" type: "SPP" bottom: "data" top: "s" spp_param { pyramid_height: 3 } }',
    "spp_height1": 'layer { name: "s" type: "SPP" bottom: "data" top: "s" spp_param { '
    'pyramid_height: 1 pool: AVE } }',
    # dillerch/caffe's two forms: kernel ceil(H / b), stride floor(H / b) levels; max over bins
    "spp_pyramid_type": 'layer { name: "s" type: "SPP" bottom: "data" top: "s" spp_param { '
    'pool: MAX pyramid_type: SPP_NET6 } } layer { name: "t" type: "SPP" bottom: "data" top: "t" '
    'spp_param { pool: AVE pyramid_type: SPP_NET4 } }',
    "spp_pyramid_shape": 'layer { name: "s" type: "SPP" bottom: "data" top: "s" spp_param { '
    'pyramid_shape: 1 pyramid_shape: 2 pyramid_shape: 3 pyramid_shape: 6 } }',
    "lrn_across": 'layer { name: "n" type: "LRN" bottom: "data" top: "n" '
    'lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 k: 2 } }',
    "lrn_within": 'layer { name: "n" type: "LRN" bottom: "data" top: "n" '
    'lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 norm_region: WITHIN_CHANNEL } }',
    "ip_axis2_transpose": 'layer { name: "f" type: "InnerProduct" bottom: "data" top: "f" '
    'inner_product_param { num_output: 5 axis: 2 transpose: true } }',
    "ip_softmax": 'layer { name: "f" type: "InnerProduct" bottom: "data" top: "f" '
    'inner_product_param { num_output: 5 } } layer { name: "s" type: "Softmax" bottom: "f" '
    'top: "s" }',
    "softmax_axis": 'layer { name: "s" type: "Softmax" bottom: "data" top: "s" '
    'softmax_param { axis: 2 } }',
    "batchnorm_scale": 'layer { name: "bn" type: "BatchNorm" bottom: "data" top: "data" } '
    'layer { name: "sc" type: "Scale" bottom: "data" top: "data" scale_param { bias_term: true } }',
    "batchnorm_batch_stats": 'layer { name: "bn" type: "BatchNorm" bottom: "data" top: "b" '
    'batch_norm_param { use_global_stats: false } }',
    "scale_axes": 'layer { name: "sc" type: "Scale" bottom: "data" top: "s" '
    'scale_param { axis: 1 num_axes: 2 } } layer { name: "b" type: "Bias" bottom: "s" top: "b" '
    'bias_param { axis: 2 num_axes: -1 } }',
    "scale_bottom": 'layer { name: "g" type: "Pooling" bottom: "data" top: "g" pooling_param '
    '{ pool: AVE global_pooling: true } } layer { name: "fl" type: "Flatten" bottom: "g" top: "f" } '
    'layer { name: "sc" type: "Scale" bottom: "data" bottom: "f" top: "s" '
    'scale_param { axis: 0 } } layer { name: "b" type: "Bias" bottom: "s" bottom: "f" top: "b" '
    'bias_param { axis: 0 } }',
    "eltwise": 'layer { name: "a" type: "TanH" bottom: "data" top: "a" } '
    'layer { name: "s" type: "Eltwise" bottom: "data" bottom: "a" top: "s" eltwise_param '
    '{ operation: SUM coeff: 0.5 coeff: -2 } } layer { name: "p" type: "Eltwise" bottom: "s" '
    'bottom: "a" top: "p" eltwise_param { operation: PROD } } layer { name: "m" type: "Eltwise" '
    'bottom: "p" bottom: "data" top: "m" eltwise_param { operation: MAX } }',
    "concat_slice_split": 'layer { name: "sl" type: "Slice" bottom: "data" top: "a" top: "b" '
    'top: "c" slice_param { axis: 3 slice_point: 2 slice_point: 5 } } layer { name: "cc" '
    'type: "Concat" bottom: "c" bottom: "a" top: "cc" concat_param { axis: 3 } } layer { '
    'name: "e1" type: "Exp" bottom: "cc" top: "e1" } layer { name: "e2" type: "Sigmoid" '
    'bottom: "cc" top: "e2" } layer { name: "z" type: "Silence" bottom: "b" }',
    "flatten_reshape": 'layer { name: "f" type: "Flatten" bottom: "data" top: "f" flatten_param '
    '{ axis: 1 end_axis: 2 } } layer { name: "r" type: "Reshape" bottom: "f" top: "r" '
    'reshape_param { shape { dim: 0 dim: -1 dim: 3 } } }',
    "crop": 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param '
    '{ pool: MAX kernel_size: 2 stride: 2 } } layer { name: "c" type: "Crop" bottom: "data" '
    'bottom: "p" top: "c" crop_param { axis: 2 offset: 1 offset: 2 } }',
    "neurons": 'layer { name: "r" type: "ReLU" bottom: "data" top: "r" relu_param '
    '{ negative_slope: 0.1 } } layer { name: "e" type: "ELU" bottom: "r" top: "e" elu_param '
    '{ alpha: 0.7 } } layer { name: "b" type: "BNLL" bottom: "e" top: "b" } '
    'layer { name: "t" type: "Threshold" bottom: "data" top: "t" threshold_param { threshold: 0.3 } } '
    'layer { name: "c" type: "Clip" bottom: "data" top: "c" clip_param { min: -0.5 max: 0.2 } } '
    'layer { name: "w" type: "Swish" bottom: "data" top: "w" swish_param { beta: 1.5 } } '
    'layer { name: "r6" type: "ReLU6" bottom: "w" top: "r6" } '
    'layer { name: "d" type: "Dropout" bottom: "data" top: "d" }',
    "prelu": 'layer { name: "p" type: "PReLU" bottom: "data" top: "p" } layer { name: "q" '
    'type: "PReLU" bottom: "data" top: "q" prelu_param { channel_shared: true } }',
    "power_exp_log": 'layer { name: "a" type: "AbsVal" bottom: "data" top: "a" } '
    'layer { name: "p" type: "Power" bottom: "a" top: "p" power_param { power: 1.5 scale: 2 '
    'shift: 1 } } layer { name: "e" type: "Exp" bottom: "data" top: "e" exp_param { base: 2 '
    'scale: 0.5 shift: 0.3 } } layer { name: "l" type: "Log" bottom: "p" top: "l" log_param '
    '{ base: 10 scale: 1.5 shift: 0.1 } }',
    "argmax": 'layer { name: "a" type: "ArgMax" bottom: "data" top: "a" argmax_param { top_k: 3 '
    'out_max_val: true } } layer { name: "b" type: "ArgMax" bottom: "data" top: "b" '
    'argmax_param { axis: 1 } }',
    "reduction": 'layer { name: "r" type: "Reduction" bottom: "data" top: "r" reduction_param '
    '{ operation: SUMSQ axis: 2 coeff: 0.5 } } layer { name: "m" type: "Reduction" bottom: '
    '"data" top: "m" reduction_param { operation: MEAN axis: 1 } } layer { name: "s" type: '
    '"Reduction" bottom: "data" top: "s" reduction_param { operation: ASUM axis: 0 } }',
    "tile_mvn": 'layer { name: "t" type: "Tile" bottom: "data" top: "t" tile_param { axis: 1 '
    'tiles: 2 } } layer { name: "m" type: "MVN" bottom: "t" top: "m" } layer { name: "n" '
    'type: "MVN" bottom: "data" top: "n" mvn_param { across_channels: true normalize_variance: '
    'false } }',
    "permute_shuffle_normalize": 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
    'convolution_param { num_output: 6 kernel_size: 1 } } layer { name: "s" type: "ShuffleChannel" '
    'bottom: "c" top: "s" shuffle_channel_param { group: 2 } } layer { name: "p" type: "Permute" '
    'bottom: "s" top: "p" permute_param { order: 0 order: 2 order: 3 order: 1 } } '
    'layer { name: "n" type: "Normalize" bottom: "c" top: "n" norm_param { across_spatial: false '
    'channel_shared: false } }',
    "interp_upsample": 'layer { name: "i" type: "Interp" bottom: "data" top: "i" interp_param '
    '{ zoom_factor: 3 } } layer { name: "j" type: "Interp" bottom: "data" top: "j" interp_param '
    '{ height: 5 width: 11 pad_beg: 0 pad_end: -1 } } layer { name: "u" type: "Upsample" '
    'bottom: "data" top: "u" upsample_param { scale: 2 } }',
    "axpy": 'layer { name: "g" type: "Pooling" bottom: "data" top: "g" pooling_param '
    '{ pool: AVE global_pooling: true } } layer { name: "a" type: "Axpy" bottom: "g" '
    'bottom: "data" bottom: "data" top: "a" }',
    "selu": 'layer { name: "s" type: "SeLu" bottom: "data" top: "s" }',
    # SegNet's BN: scale x + shift (INFERENCE); its batch statistics and their tops (LEARN)
    "segnet_bn": 'layer { name: "b" type: "BN" bottom: "data" top: "b" bn_param '
    '{ bn_mode: INFERENCE } } layer { name: "c" type: "BN" bottom: "b" top: "c" top: "mu" '
    'top: "var" bn_param { bn_mode: LEARN } }',
    # SegNet's Upsample: max-unpooling at a Pooling layer's mask (7 x 9: ceil, pad_out)
    "segnet_unpool": 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" top: "m" '
    'pooling_param { pool: MAX kernel_size: 2 stride: 2 } } layer { name: "u" type: "Upsample" '
    'bottom: "p" bottom: "m" top: "u" upsample_param { scale: 2 pad_out_h: true '
    'pad_out_w: true } }',
    "conv3d": 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
    'convolution_param { num_output: 2 kernel_size: 2 kernel_size: 3 kernel_size: 2 pad: 1 } }',
    # NVCaffe's BatchNorm with its own scale and bias, global and batch statistics
    "nvcaffe_bn_scale_bias": 'layer { name: "b" type: "BatchNorm" bottom: "data" top: "b" '
    'batch_norm_param { use_global_stats: true scale_bias: true } } layer { name: "c" '
    'type: "BatchNorm" bottom: "b" top: "c" batch_norm_param { use_global_stats: false '
    'scale_bias: true } }',
    # darknet2caffe's Pooling (one more output where kernel - stride is odd)
    "darknet_pool": 'layer { name: "layer5-maxpool" type: "Pooling" bottom: "data" top: "p" '
    'pooling_param { pool: MAX kernel_size: 2 stride: 1 } }',
    # happynear's Normalize (no norm_param): L2 with its norm top, L1
    "feature_normalize": 'layer { name: "n" type: "Normalize" bottom: "data" top: "n" top: "nn" '
    'normalize_param { normalize_type: "L2" } } layer { name: "m" type: "Normalize" '
    'bottom: "data" top: "m" normalize_param { normalize_type: "L1" } }',
    # 3-d pooling (the video forks' N-d geometry): MAX with its mask (ceil overhang), padded AVE
    "pool3d": 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" top: "m" '
    'pooling_param { pool: MAX kernel_size: 2 stride: 2 } } layer { name: "q" type: "Pooling" '
    'bottom: "data" top: "q" pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }',
}
SHAPES = {"conv3d": ("data", (1, 2, 4, 5, 6)), "pool3d": ("data", (1, 2, 5, 6, 7)),
          "ip_axis2_transpose": ("data", (2, 3, 4, 5))}


@pytest.mark.parametrize("case", sorted(CASES))
def test_layer_roundtrip(case):
    roundtrip(make_net(CASES[case], SHAPES.get(case, ("data", (2, 3, 7, 9)))))


def test_embed_filter_reindex():
    body = ('layer { name: "e" type: "Embed" bottom: "ids" top: "e" embed_param { num_output: 4 '
            'input_dim: 10 } } layer { name: "f" type: "Filter" bottom: "x" bottom: "sel" top: "f" } '
            'layer { name: "r" type: "BatchReindex" bottom: "x" bottom: "idx" top: "r" }')
    net = make_net(body, [("ids", (3, 2)), ("x", (4, 3)), ("sel", (4,)), ("idx", (5,))])
    model = caffe_onnx.to_model(net)
    feeds = {"ids": np.array([[1, 9], [0, 3], [4, 4]], np.float32),
             "x": np.arange(12, dtype=np.float32).reshape(4, 3),
             "sel": np.array([1, 0, 1, 1], np.float32), "idx": np.array([3, 0, 0, 2, 1], np.float32)}
    got = session(model).run(["e", "f", "r"], feeds)
    net.forward(**feeds)
    for name, g in zip(["e", "f", "r"], got):
        np.testing.assert_allclose(g, net.blobs[name].data, rtol=1e-6)


def test_pooling_matches_caffe_rules_numerically():
    """AVE divisor: the window clipped to H + pad (hand-computed), and the clipped last window."""
    net = make_net('layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param '
                   '{ pool: AVE kernel_size: 3 stride: 2 pad: 1 } }', ("data", (1, 1, 4, 4)))
    model = caffe_onnx.to_model(net)
    x = np.ones((1, 1, 4, 4), np.float32)
    y = session(model).run(["p"], {"data": x})[0][0, 0]
    # output 3x3 (ceil((4 + 2 - 3) / 2) + 1 = 3): windows start at -1, 1, 3; pool sizes 3, 3, 2
    # (the last ends at min(6, 4 + 1) = 5); the sums count image pixels only: 2, 3, 1
    sums, sizes = np.array([2.0, 3.0, 1.0]), np.array([3.0, 3.0, 2.0])
    np.testing.assert_allclose(y, np.outer(sums, sums) / np.outer(sizes, sizes), rtol=1e-6)


def test_names_kept_and_in_place_values():
    net = make_net('layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1" '
                   'convolution_param { num_output: 2 kernel_size: 1 } } layer { name: "relu1" '
                   'type: "ReLU" bottom: "conv1" top: "conv1" }')
    model = roundtrip(net)
    nodes = {n.name: n for n in model.graph.node}
    assert nodes["conv1"].output == ["conv1/conv1"] and nodes["relu1"].output == ["conv1"]
    assert [o.name for o in model.graph.output] == ["conv1"]
    assert [i.name for i in model.graph.input] == ["data"]


def test_dynamic_batch():
    net = make_net(CASES["ip_softmax"] + ' layer { name: "r" type: "Reshape" bottom: "s" top: "r" '
                   'reshape_param { shape { dim: 0 dim: -1 dim: 1 } } }')
    model = caffe_onnx.to_model(net, dynamic_batch=True)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    sess = session(model)
    x = np.random.default_rng(0).standard_normal((5, 3, 7, 9)).astype(np.float32)
    got = sess.run(["r"], {"data": x})[0]
    net.blobs["data"].reshape(*x.shape)
    net.forward(data=x)
    np.testing.assert_allclose(got, net.blobs["r"].data, rtol=1e-4, atol=1e-6)


def test_opset_range():
    net = make_net(CASES["neurons"])
    with pytest.raises(caffe_onnx.ExportError, match="opset"):
        caffe_onnx.to_model(net, opset=9)
    roundtrip(net, opset=17)
    for body in (CASES["reduction"], CASES["tile_mvn"]):   # opset 18: Reduce* take axes as input
        roundtrip(make_net(body), opset=18)


def test_package_does_not_shadow_onnx():
    code = "import caffepy.onnx, sys; assert 'onnx' not in sys.modules; import onnx; onnx.helper"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=ROOT))


@pytest.mark.slow
def test_export_command(tmp_path):
    proto = tmp_path / "net.prototxt"
    proto.write_text('input: "data" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
                     + CASES["ip_softmax"])
    net = make_net(CASES["ip_softmax"], ("data", (1, 3, 8, 8)))
    weights = tmp_path / "w.caffemodel"
    net.save(str(weights))
    out = tmp_path / "m.onnx"
    cmd = [sys.executable, "-m", "caffepy", "export", str(proto), "--weights", str(weights),
           "-o", str(out), "--input", "data=2,3,8,8", "--dynamic-batch", "--check"]
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert "check s: relative error" in r.stdout and out.exists()



def test_export_command_bad_input_is_one_line(tmp_path, capsys):
    from caffepy.cli import main
    proto = tmp_path / "net.prototxt"
    proto.write_text('input: "data" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
                     + CASES["ip_softmax"])
    assert main(["export", str(proto), "-o", str(tmp_path / "m.onnx"), "--input", "nope=1,2"]) == 1
    err = capsys.readouterr().err
    assert "nope" in err and len(err.strip().splitlines()) == 1
    proto.write_text(proto.read_text() + 'layer { name: "py" type: "Python" bottom: "s" top: "o" '
                     'python_param { module: "onnx_test_layer" layer: "Id" } }')
    (tmp_path / "onnx_test_layer.py").write_text(
        "import caffepy\nclass Id(caffepy.Layer):\n    def setup(self, b, t): pass\n"
        "    def reshape(self, b, t): t[0].reshape(*b[0].data.shape)\n"
        "    def forward(self, b, t): t[0].data[...] = b[0].data\n")
    sys.path.insert(0, str(tmp_path))
    try:
        assert main(["export", str(proto), "-o", str(tmp_path / "m.onnx")]) == 1
    finally:
        sys.path.remove(str(tmp_path))
    err = capsys.readouterr().err
    assert "layer 'py' (Python)" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "m.onnx").exists()


def test_rpn_proposal_layer():
    """py-faster-rcnn's proposal layer (caffepy's built-in stand-in) with TEST's settings
    (6000 pre-NMS, 300 post-NMS, NMS 0.7, min size 16); the roi count is found at run time."""
    body = ('layer { name: "proposal" type: "Python" bottom: "rpn_cls_prob" bottom: "rpn_bbox" '
            'bottom: "im_info" top: "rois" top: "scores" python_param { module: '
            '"rpn.proposal_layer" layer: "ProposalLayer" param_str: "\'feat_stride\': 16" } } '
            'layer { name: "pool" type: "ROIPooling" bottom: "feat" bottom: "rois" top: "pool" '
            'roi_pooling_param { pooled_w: 2 pooled_h: 2 spatial_scale: 0.0625 } } '
            'layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc" '
            'inner_product_param { num_output: 3 } }')
    net = make_net(body, [("rpn_cls_prob", (1, 18, 12, 14)), ("rpn_bbox", (1, 36, 12, 14)),
                          ("im_info", (1, 3)), ("feat", (1, 4, 12, 14))])
    model = caffe_onnx.to_model(net, extra_outputs=["rois", "scores"])
    from caffepy.onnx.export import random_inputs
    feeds = random_inputs(net, 3)
    feeds["rpn_cls_prob"] = np.abs(feeds["rpn_cls_prob"])
    feeds["rpn_bbox"] *= np.float32(0.2)
    feeds["im_info"] = np.array([[192, 224, 1.0]], np.float32)
    net.forward(**feeds)
    got = session(model).run(["rois", "scores", "fc"], feeds)
    assert got[0].shape[0] > 8
    for name, g in zip(["rois", "scores", "fc"], got):
        np.testing.assert_allclose(g, net.blobs[name].data, rtol=1e-4, atol=1e-3)


def test_layers_of_one_name_export_by_position():
    # Caffe lets layers share a name (a NetSpec-unrolled LSTM's two Input layers): each layer's
    # tops are its own
    net = make_net('layer { name: "in" type: "Input" top: "x" top: "y" input_param { '
                   'shape { dim: 2 dim: 3 } shape { dim: 2 dim: 3 } } } '
                   'layer { name: "in" type: "Input" top: "z" input_param { shape { dim: 2 '
                   'dim: 3 } } } layer { name: "e" type: "Eltwise" bottom: "x" bottom: "y" '
                   'bottom: "z" top: "e" }')
    model = roundtrip(net)
    assert sorted(i.name for i in model.graph.input) == ["data", "x", "y", "z"]
