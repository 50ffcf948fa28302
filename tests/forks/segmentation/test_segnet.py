import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.segmentation.segnet import SegNetBNLayer, SegNetUpsampleLayer
from caffepy.layers.normalization import BNLayer
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

SEG_BN = ('type: "BN" bn_param { scale_filler { type: "constant" value: 1.5 } '
          'shift_filler { type: "constant" value: 0.25 } }')


def test_bn_variant_choice():
    assert isinstance(make_layer(SEG_BN), SegNetBNLayer)
    assert isinstance(make_layer('type: "BN" bn_param { bn_mode: INFERENCE }'), SegNetBNLayer)
    assert isinstance(make_layer('type: "BN" param { lr_mult: 1 } param { lr_mult: 1 }'),
                      SegNetBNLayer)
    assert isinstance(make_layer('type: "BN"'), BNLayer)
    assert isinstance(make_layer('type: "BN" bn_param { frozen: true }'), BNLayer)
    assert isinstance(make_layer('type: "BN" ' + 'param { lr_mult: 0 } ' * 4), BNLayer)


def test_segnet_bn_learn_numbers_and_tops():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5)) * 2 + 1
    layer = make_layer(SEG_BN, phase=caffe_pb2.TEST)  # LEARN uses batch statistics in TEST too
    y, mean, var = run_layer(layer, make_blobs([x]), make_blobs(3))
    mu = x.mean(axis=(0, 2, 3), keepdims=True)
    v = ((x - mu) ** 2).mean(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, 1.5 * (x - mu) / np.sqrt(v + 1e-9) + 0.25, rtol=1e-10)
    np.testing.assert_allclose(mean, mu)
    np.testing.assert_allclose(var, v)
    assert [b.shape for b in layer.blobs] == [(1, 3, 1, 1), (1, 3, 1, 1)]


def test_segnet_bn_inference_numbers():
    x = np.arange(24, dtype=float).reshape(1, 2, 3, 4)
    layer = make_layer('type: "BN" bn_param { bn_mode: INFERENCE }')
    layer.setup(make_blobs([x]), make_blobs(1))
    layer.blobs[0].data[...] = np.array([2.0, -1.0]).reshape(1, 2, 1, 1)
    layer.blobs[1].data[...] = np.array([0.5, 3.0]).reshape(1, 2, 1, 1)
    top = make_blobs(1)
    layer.reshape(make_blobs([x]), top)
    layer.forward(make_blobs([x]), top)
    np.testing.assert_allclose(top[0].data[0, 0], 2 * x[0, 0] + 0.5)
    np.testing.assert_allclose(top[0].data[0, 1], -x[0, 1] + 3)


@pytest.mark.parametrize("mode", ["LEARN", "INFERENCE"])
def test_segnet_bn_gradient(mode):
    x = np.random.default_rng(1).standard_normal((2, 2, 3, 2))
    layer = make_layer('type: "BN" bn_param { bn_mode: %s scale_filler { type: "gaussian" } '
                       'shift_filler { type: "gaussian" } }' % mode)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


@pytest.mark.parametrize("mode", ["LEARN", "INFERENCE"])
def test_segnet_bn_reads_a_2d_bottom_through_the_legacy_accessors(mode):
    """An InnerProduct's N x C output: the fork's num / channels / height / width read it as
    N x C x 1 x 1, and its top is that 4-d shape."""
    x = np.random.default_rng(3).standard_normal((5, 4))
    text = ('type: "BN" bn_param { bn_mode: %s scale_filler { type: "gaussian" } '
            'shift_filler { type: "gaussian" } }' % mode)
    flat, four = make_layer(text), make_layer(text)
    (y,) = run_layer(flat, make_blobs([x]), make_blobs(1))
    four.setup(make_blobs([x.reshape(5, 4, 1, 1)]), make_blobs(1))
    for a, b in zip(four.blobs, flat.blobs):
        a.data[...] = b.data
    (want,) = run_layer(four, make_blobs([x.reshape(5, 4, 1, 1)]), make_blobs(1))
    assert y.shape == (5, 4, 1, 1)
    np.testing.assert_allclose(y, want, rtol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))
    with pytest.raises(NetError, match="at most 4 axes"):
        make_layer(text).setup(make_blobs([np.zeros((1, 2, 2, 2, 2))]), make_blobs(1))


def _pool_with_mask(x, text='kernel_size: 2 stride: 2'):
    pool = make_layer('type: "Pooling" pooling_param { pool: MAX %s }' % text)
    top = make_blobs(2)
    run_layer(pool, make_blobs([x]), top)
    return top


def test_upsample_unpools_with_pooling_mask():
    x = np.random.default_rng(2).standard_normal((1, 2, 4, 6))
    pooled, mask = _pool_with_mask(x)
    layer = make_layer('type: "Upsample" bottom: "p" bottom: "m" upsample_param { scale: 2 }')
    assert isinstance(layer, SegNetUpsampleLayer)
    (y,) = run_layer(layer, [pooled, mask], make_blobs(1))
    want = np.where(x == np.repeat(np.repeat(pooled.data, 2, 2), 2, 3), x, 0)
    np.testing.assert_allclose(y, want)
    check_layer_gradient(layer, [pooled, mask], make_blobs(1), check_bottom=[0])


def test_upsample_sizes_and_errors():
    x = np.random.default_rng(3).standard_normal((1, 1, 5, 5))
    pooled, mask = _pool_with_mask(x)  # ceil: 3 x 3
    for text, shape in [("upsample_h: 5 upsample_w: 5", (5, 5)),
                        ("scale: 2 pad_out_h: true pad_out_w: true", (5, 5)),
                        ("", (6, 6)), ("scale_h: 2 scale_w: 3", (6, 9))]:
        layer = make_layer('type: "Upsample" bottom: "p" bottom: "m" upsample_param { %s }' % text)
        (y,) = run_layer(layer, [pooled, mask], make_blobs(1))
        assert y.shape == (1, 1) + shape
        assert np.isclose(y.sum(), pooled.data.sum())
    small = make_layer('type: "Upsample" bottom: "p" bottom: "m" '
                       'upsample_param { upsample_h: 3 upsample_w: 3 }')
    with pytest.raises(NetError, match="out of range"):
        run_layer(small, [pooled, mask], make_blobs(1))
    with pytest.raises(NetError, match="scale of 2"):
        make_layer('type: "Upsample" bottom: "p" bottom: "m" '
                   'upsample_param { scale: 3 pad_out_h: true }').setup([pooled, mask],
                                                                      make_blobs(1))


def test_sample_weights_test_dropout_samples_in_test():
    x = np.ones((200, 10))
    plain = make_layer('type: "Dropout" dropout_param { dropout_ratio: 0.5 }')
    (y0,) = run_layer(plain, make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y0, x)
    mc = make_layer('type: "Dropout" dropout_param { dropout_ratio: 0.5 sample_weights_test: true }')
    (y1,) = run_layer(mc, make_blobs([x]), make_blobs(1))
    assert set(np.unique(y1)) == {0.0, 2.0}
    assert 0.4 < (y1 == 0).mean() < 0.6


def test_class_weighted_softmax_loss_numbers_and_gradient():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 2, 2))
    lab = np.array([0, 1, 2, 1, 2, 2, 0, 1]).reshape(2, 1, 2, 2)
    w = [0.5, 2.0, 1.5]
    text = ('type: "SoftmaxWithLoss" loss_param { weight_by_label_freqs: true ignore_label: 2 '
            'class_weighting: 0.5 class_weighting: 2.0 class_weighting: 1.5 }')
    (loss,) = run_layer(make_layer(text), make_blobs([x, lab]), make_blobs(1))
    p = np.exp(x) / np.exp(x).sum(1, keepdims=True)
    want, count = 0.0, 0
    for n in range(2):
        for h in range(2):
            for v in range(2):
                c = lab[n, 0, h, v]
                if c != 2:
                    want -= w[c] * np.log(p[n, c, h, v])
                    count += 1
    assert np.isclose(loss, want / count)
    check_layer_gradient(make_layer(text), make_blobs([x, lab]), make_blobs(1), check_bottom=[0])


def _write_png(path, arr):
    from caffepy.data.image import encode_image
    with open(path, "wb") as f:
        f.write(encode_image(arr, "png"))


def test_dense_image_data_reads_pairs(tmp_path):
    rng = np.random.default_rng(5)
    lines = []
    for i in range(3):
        img = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
        lab = rng.integers(0, 5, (6, 8, 1), dtype=np.uint8)
        _write_png(tmp_path / ("img%d.png" % i), img)
        _write_png(tmp_path / ("lab%d.png" % i), lab)
        lines.append(("img%d.png lab%d.png" % (i, i), img, lab))
    (tmp_path / "list.txt").write_text("\n".join(l[0] for l in lines) + "\n")
    layer = make_layer('type: "DenseImageData" top: "data" top: "label" dense_image_data_param { '
                       'source: "%s" batch_size: 2 root_folder: "%s/" crop_height: 4 '
                       'crop_width: 6 } transform_param { mean_value: 10 mean_value: 20 '
                       'mean_value: 30 scale: 0.5 }' % (tmp_path / "list.txt", tmp_path),
                       phase=caffe_pb2.TEST)
    top = make_blobs(2)
    layer.setup([], top)
    try:
        assert top[0].shape == (2, 3, 4, 6) and top[1].shape == (2, 1, 4, 6)
        for batch in ([0, 1], [2, 0]):
            layer.forward([], top)
            for b, i in enumerate(batch):
                img, lab = lines[i][1], lines[i][2]
                want = (img[1:5, 1:7].transpose(2, 0, 1) - np.array([10, 20, 30])[:, None, None])
                np.testing.assert_allclose(top[0].data[b], want * 0.5)
                np.testing.assert_array_equal(top[1].data[b, 0], lab[1:5, 1:7, 0])
    finally:
        layer.close()
    (tmp_path / "bad.txt").write_text("only_one_column.png\n")
    with pytest.raises(NetError, match="bad.txt:1"):
        make_layer('type: "DenseImageData" top: "data" top: "label" dense_image_data_param { '
                   'source: "%s" batch_size: 1 }' % (tmp_path / "bad.txt")).setup([], make_blobs(2))


# A two-level SegNet (facts of SegNet-Tutorial's segnet_basic train / inference files: DenseImageData,
# Convolution + BN (scale / shift fillers) + ReLU, Pooling with a mask top, Upsample driven by the
# mask, class-weighted SoftmaxWithLoss with ignore_label, Accuracy with per-class top; Bayesian
# SegNet's sample_weights_test dropout), shrunk.
SEGNET = """
name: "segnet-mini"
layer { name: "data" type: "DenseImageData" top: "data" top: "label"
  dense_image_data_param { source: "train.txt" batch_size: 2 shuffle: true crop_height: 16
                           crop_width: 24 } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 6 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "conv1_bn" type: "BN" bottom: "conv1" top: "conv1"
  bn_param { scale_filler { type: "constant" value: 1 } shift_filler { type: "constant" value: 0.001 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" top: "pool1_mask"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "conv2_bn" type: "BN" bottom: "conv2" top: "conv2"
  bn_param { scale_filler { type: "constant" value: 1 } shift_filler { type: "constant" value: 0.001 } } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2" top: "pool2_mask"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "drop" type: "Dropout" bottom: "pool2" top: "pool2"
  dropout_param { dropout_ratio: 0.5 sample_weights_test: true } }
layer { name: "upsample2" type: "Upsample" bottom: "pool2" bottom: "pool2_mask" top: "up2"
  upsample_param { upsample_h: 8 upsample_w: 12 } }
layer { name: "conv2_D" type: "Convolution" bottom: "up2" top: "conv2_D"
  convolution_param { num_output: 6 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "upsample1" type: "Upsample" bottom: "conv2_D" bottom: "pool1_mask" top: "up1"
  upsample_param { scale: 2 } }
layer { name: "conv_classifier" type: "Convolution" bottom: "up1" top: "conv_classifier"
  convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "msra" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "conv_classifier" bottom: "label" top: "loss"
  loss_param { weight_by_label_freqs: true ignore_label: 3 class_weighting: 0.3
               class_weighting: 1.2 class_weighting: 4.5 class_weighting: 0 } }
layer { name: "accuracy" type: "Accuracy" bottom: "conv_classifier" bottom: "label"
  top: "accuracy" top: "per_class_accuracy" include { phase: TEST } }
"""


def test_segnet_forward_and_train_step():
    from ..nets import forward, train_step
    net = forward(SEGNET, labels=4)
    assert net.blobs["conv_classifier"].shape == (1, 4, 16, 24)
    assert net.blobs["per_class_accuracy"].shape == (4,)
    train_step(SEGNET, labels=4)
