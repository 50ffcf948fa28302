"""DSCLRCN's KLDivLoss and NSSLoss (nian-liu/DSCLRCN)."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(5)


def _backward(layer, bottom, top, weight=1.0):
    top[0].diff[...] = weight
    layer.backward(top, [True, False], bottom)
    return bottom[0].diff.copy()


def test_kldiv_forward_and_backward_by_hand():
    layer = make_layer('type: "KLDivLoss"')
    bottom, top = make_blobs([np.array([1.0, 3.0]).reshape(1, 1, 1, 2), np.ones((1, 1, 1, 2))]), make_blobs(1)
    run_layer(layer, bottom, top)
    # q = (1/2, 1/2), p = (1/4, 3/4): 1/2 log 2 + 1/2 log 2/3
    np.testing.assert_allclose(float(top[0].data), 0.5 * np.log(4.0 / 3.0), rtol=1e-4)  # up to the eps terms
    # the fork's -q (S - x) / (S x): S = 4
    np.testing.assert_allclose(_backward(layer, bottom, top, 2.0).ravel(),
                               [-2 * 0.5 * 3 / 4, -2 * 0.5 * 1 / 12], rtol=1e-4)


def test_kldiv_backward_is_the_forks_not_the_derivative():
    """Numerically, dL/dx_i = -q_i / x_i + 1 / S; the fork's backward has q_i / S for 1 / S."""
    x = RNG.uniform(0.5, 2.0, (2, 1, 3, 3))
    t = RNG.uniform(0.0, 1.0, (2, 1, 3, 3))
    layer = make_layer('type: "KLDivLoss"')
    bottom, top = make_blobs([x, t]), make_blobs(1)
    run_layer(layer, bottom, top)
    fork = _backward(layer, bottom, top)
    numeric = np.zeros_like(x)
    h = 1e-5
    for i in np.ndindex(x.shape):
        vals = []
        for d in (h, -h):
            bottom[0].data[...] = x
            bottom[0].data[i] += d
            layer.forward(bottom, top)
            vals.append(float(top[0].data))
        numeric[i] = (vals[0] - vals[1]) / (2 * h)
    s = x.reshape(2, -1).sum(1).reshape(2, 1, 1, 1)
    q = t / t.reshape(2, -1).sum(1).reshape(2, 1, 1, 1)
    np.testing.assert_allclose(numeric, fork + (1 - q) / s / 2, rtol=1e-4, atol=1e-6)


def test_nss_forward_and_backward_by_hand():
    layer = make_layer('type: "NSSLoss"')
    x = np.array([1.0, -1.0, 2.0, 0.0]).reshape(1, 1, 2, 2)
    t = np.array([0.0, 1.0, 3.0, 0.0]).reshape(1, 1, 2, 2)
    bottom, top = make_blobs([x, t]), make_blobs(1)
    run_layer(layer, bottom, top)
    np.testing.assert_allclose(float(top[0].data), -(-1.0 + 6.0) / 4.0)
    np.testing.assert_allclose(_backward(layer, bottom, top, -1.0).ravel(), [0, 0.25, 0.75, 0])


def test_nss_gradient():
    x = RNG.standard_normal((3, 1, 4, 5))
    t = RNG.uniform(0.0, 1.0, (3, 1, 4, 5))
    check_layer_gradient(make_layer('type: "NSSLoss"'), make_blobs([x, t]), make_blobs(1),
                         check_bottom=[0])


@pytest.mark.parametrize("kind", ["KLDivLoss", "NSSLoss"])
def test_refuses_multichannel_maps(kind):
    with pytest.raises(NetError, match="must be N x 1 x H x W"):
        run_layer(make_layer('type: "%s"' % kind),
                  make_blobs([np.ones((1, 2, 3, 3)), np.ones((1, 2, 3, 3))]), make_blobs(1))


SALIENCY_NET = """name: "saliency_tiny"
layer { name: "data" type: "Input" top: "data" top: "ground_truth"
  input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } shape { dim: 2 dim: 1 dim: 8 dim: 8 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 1 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "saliency_map" type: "Sigmoid" bottom: "conv" top: "saliency_map" }
layer{
  name: "nssloss"
  type: "NSSLoss"
  bottom: "saliency_map"
  bottom: "ground_truth"
  top: "nssloss"
  loss_weight: -1
}
layer{
  name: "kldloss"
  type: "KLDivLoss"
  bottom: "saliency_map"
  bottom: "ground_truth"
  top: "kldloss"
  loss_weight: 10
}
"""


def test_saliency_net_builds_strict(tmp_path, capsys):
    from caffepy.cli import main
    path = tmp_path / "train_nss_kldloss.prototxt"
    path.write_text(SALIENCY_NET)
    assert main(["summary", "--strict", str(path)]) in (0, None)
    out = capsys.readouterr().out
    assert "KLDivLoss" in out and "NSSLoss" in out
