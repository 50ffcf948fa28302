import numpy as np

import caffepy
from caffepy.proto import caffe_pb2
from caffepy.testing import GradientChecker, make_blobs, make_layer, run_layer
from ..nets import forward, train_step

CONV = ('type: "CConvolution" convolution_param { num_output: 3 kernel_size: 2 stride: 1 '
        'weight_filler { type: "gaussian" std: 1 } bias_filler { type: "gaussian" std: 1 } } '
        'cconvolution_param { gamma: 0 power: 1 c_rate: %g iter_stop: 10 '
        'weight_mask_filler { type: "constant" value: 1 } '
        'bias_mask_filler { type: "constant" value: 1 } }')
IP = ('type: "CInnerProduct" inner_product_param { num_output: 4 '
      'weight_filler { type: "gaussian" std: 1 } bias_filler { type: "gaussian" std: 1 } } '
      'cinner_product_param { gamma: 0 power: 1 c_rate: %g iter_stop: 10 '
      'weight_mask_filler { type: "constant" value: 1 } '
      'bias_mask_filler { type: "constant" value: 1 } }')
PLAIN_CONV = ('type: "Convolution" convolution_param { num_output: 3 kernel_size: 2 stride: 1 }')


def _conv_ref(x, w, b):
    n, c, h, wd = x.shape
    o, _, k, _ = w.shape
    out = np.zeros((n, o, h - k + 1, wd - k + 1))
    for i in range(h - k + 1):
        for j in range(wd - k + 1):
            out[:, :, i, j] = np.einsum("nckl,ockl->no", x[:, :, i:i + k, j:j + k], w) + b
    return out


def test_cconvolution_forward_uses_masked_parameters():
    caffepy.set_random_seed(3)
    x = np.random.default_rng(0).standard_normal((2, 2, 4, 5))
    layer = make_layer(CONV % 3)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    assert [b.shape for b in layer.blobs] == [(3, 2, 2, 2), (3,), (3, 2, 2, 2), (3,)]
    assert np.all(layer.blobs[2].data == 1) and np.all(layer.blobs[3].data == 1)
    layer.blobs[2].data[0, 1] = 0
    layer.blobs[3].data[2] = 0
    layer.forward(bottom, top)
    w, b = layer.blobs[0].data, layer.blobs[1].data
    want = _conv_ref(x, w * layer.blobs[2].data, b * layer.blobs[3].data)
    np.testing.assert_allclose(top[0].data, want, rtol=1e-12)


def _checked(text, x):
    """Gradient check with all-ones masks (the masks themselves get no gradient)."""
    layer = make_layer(text)
    bottom, top = make_blobs([x]), make_blobs(1)
    caffepy.set_random_seed(1)
    layer.setup(bottom, top)
    layer.param_propagate_down[2:] = [False, False]
    GradientChecker().check(layer, bottom, top, first_setup=False)


def test_cconvolution_and_cinner_product_gradients():
    rng = np.random.default_rng(1)
    _checked(CONV % 3, rng.standard_normal((2, 2, 4, 4)))
    _checked(IP % 3, rng.standard_normal((3, 2, 3)))


def test_parameter_gradient_is_that_of_the_masked_parameter():
    """dW = dW * T + d(W * T): a pruned weight still receives the gradient of its position."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 2, 4, 4))
    dy = rng.standard_normal((2, 3, 3, 3))
    layer = make_layer(CONV % 3)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    mask = (rng.random((3, 2, 2, 2)) > 0.5).astype(float)
    layer.blobs[2].data[...] = mask
    layer.forward(bottom, top)
    plain = make_layer(PLAIN_CONV)
    pb, pt = make_blobs([x]), make_blobs(1)
    plain.setup(pb, pt)
    plain.blobs[0].data[...] = layer.blobs[0].data * mask
    plain.blobs[1].data[...] = layer.blobs[1].data
    plain.forward(pb, pt)
    np.testing.assert_allclose(top[0].data, pt[0].data, rtol=1e-12)
    for blobs in (layer.blobs, plain.blobs):
        for p in blobs:
            p.diff[...] = 0
    layer.blobs[0].diff[...] = 5.0                 # an earlier diff: multiplied by the mask
    top[0].diff[...] = dy
    pt[0].diff[...] = dy
    layer.backward(top, [True], bottom)
    plain.backward(pt, [True], pb)
    np.testing.assert_allclose(layer.blobs[0].diff, 5.0 * mask + plain.blobs[0].diff, rtol=1e-12)
    np.testing.assert_allclose(bottom[0].diff, pb[0].diff, rtol=1e-12)
    assert not layer.blobs[2].diff.any()


def _train_layer(text, x, iteration=0):
    layer = make_layer(text, phase=caffe_pb2.TRAIN)
    bottom, top = make_blobs([x]), make_blobs(1)
    caffepy.set_random_seed(1)
    layer.setup(bottom, top)
    layer.set_iter(iteration, 100)
    return layer, bottom, top


def test_masks_pruned_and_spliced_by_the_thresholds():
    x = np.ones((1, 3))
    layer, bottom, top = _train_layer(IP % 0.5, x)
    w = np.array([[0.1, -2.0, 0.5], [1.0, 0.05, -0.3], [3.0, 0.2, 0.0], [-0.6, 0.8, 1.5]])
    b = np.array([0.25, -1.2, 0.4, 0.0])
    layer.blobs[0].data[...] = w
    layer.blobs[1].data[...] = b
    layer.blobs[2].data[0, 2] = 0                  # a pruned weight, |0.5|
    layer.forward(bottom, top)
    vals = np.concatenate([w.ravel(), b])
    nz = vals[vals != 0]                            # CInnerProduct: statistics of W, b unmasked
    mu, std = np.abs(nz).mean(), np.abs(nz).std()   # the spread of |w|
    t = max(mu + 0.5 * std, 0)
    assert np.isclose(layer.mu, mu) and np.isclose(layer.std, std)
    want_w = np.where(np.abs(w) <= 0.9 * t, 0.0, 1.0)
    want_w[0, 2] = 1.0 if 0.5 > 1.1 * t else 0.0
    np.testing.assert_array_equal(layer.blobs[2].data, want_w)
    np.testing.assert_array_equal(layer.blobs[3].data, np.where(np.abs(b) <= 0.9 * t, 0, 1))
    np.testing.assert_allclose(top[0].data, x @ (w * want_w).T + b * layer.blobs[3].data)


def test_masks_frozen_after_iter_stop_and_in_test():
    x = np.ones((1, 3))
    layer, bottom, top = _train_layer(IP % 0.5, x, iteration=10)   # iter_stop: 10
    layer.forward(bottom, top)
    assert np.all(layer.blobs[2].data == 1)
    test_layer = make_layer(IP % 0.5)
    tb, tt = make_blobs([x]), make_blobs(1)
    run_layer(test_layer, tb, tt)
    assert np.all(test_layer.blobs[2].data == 1)


def test_cconvolution_statistics_of_the_masked_weights():
    x = np.ones((1, 1, 2, 2))
    text = CONV.replace("num_output: 3", "num_output: 1") % 0.0
    layer, bottom, top = _train_layer(text, x)
    layer.blobs[0].data[...] = [[[[1.0, 2.0], [3.0, 4.0]]]]
    layer.blobs[1].data[...] = [0.0]
    layer.blobs[2].data[0, 0, 1, 1] = 0            # 4 is masked out: mean of |1, 2, 3|
    layer.forward(bottom, top)
    assert np.isclose(layer.mu, 2.0) and np.isclose(layer.std, np.std([1.0, 2.0, 3.0]))
    # t = mu = 2: 1 and 2 (<= 1.8? only 1) pruned; masked 4 > 2.2 spliced back
    np.testing.assert_array_equal(layer.blobs[2].data.ravel(), [0, 1, 1, 1])


NET = '''
name: "dns_lenet"
input: "data" input_shape { dim: 1 dim: 1 dim: 8 dim: 8 }
input: "label" input_shape { dim: 1 }
layer { name: "conv1" type: "CConvolution" bottom: "data" top: "conv1"
  param { lr_mult: 1 } param { lr_mult: 2 } param { lr_mult: 0 } param { lr_mult: 0 }
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } }
  cconvolution_param { gamma: 0.0001 power: 1 c_rate: 4 iter_stop: 14000
    weight_mask_filler { type: "constant" value: 1 }
    bias_mask_filler { type: "constant" value: 1 } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "CInnerProduct" bottom: "pool1" top: "ip1"
  param { lr_mult: 1 } param { lr_mult: 2 } param { lr_mult: 0 } param { lr_mult: 0 }
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } }
  cinner_product_param { gamma: 0.0001 power: 1 c_rate: 4 iter_stop: 14000
    weight_mask_filler { type: "constant" value: 1 }
    bias_mask_filler { type: "constant" value: 1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip1" bottom: "label" top: "loss" }
'''


def test_dns_net_forward_and_train_step():
    net = forward(NET)
    assert len(net.params["conv1"]) == 4 and len(net.params["ip1"]) == 4
    loss, change = train_step(NET)
    assert np.isfinite(loss) and change > 0


def test_cconvolution_remasks_before_each_bottom():
    """With two bottoms the fork multiplies the diff by the mask before each bottom's term:
    dW = (g1 * T + g2)  (from a zero diff), g_i the masked-weight gradient of bottom i."""
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((1, 2, 4, 4)) for _ in range(2)]
    dys = [rng.standard_normal((1, 3, 3, 3)) for _ in range(2)]
    layer = make_layer(CONV % 3)
    bottom, top = make_blobs(xs), make_blobs(2)
    layer.setup(bottom, top)
    mask = (rng.random((3, 2, 2, 2)) > 0.5).astype(float)
    layer.blobs[2].data[...] = mask
    layer.forward(bottom, top)
    grads = []
    for x, dy in zip(xs, dys):
        plain = make_layer(PLAIN_CONV)
        pb, pt = make_blobs([x]), make_blobs(1)
        plain.setup(pb, pt)
        plain.blobs[0].data[...] = layer.blobs[0].data * mask
        plain.forward(pb, pt)
        plain.blobs[0].diff[...] = 0
        pt[0].diff[...] = dy
        plain.backward(pt, [True], pb)
        grads.append((plain.blobs[0].diff.copy(), pb[0].diff.copy()))
    for p in layer.blobs:
        p.diff[...] = 0
    for t, dy in zip(top, dys):
        t.diff[...] = dy
    layer.backward(top, [True, True], bottom)
    np.testing.assert_allclose(layer.blobs[0].diff, grads[0][0] * mask + grads[1][0], rtol=1e-12)
    for b, (_, dx) in zip(bottom, grads):
        np.testing.assert_allclose(b.diff, dx, rtol=1e-12)
