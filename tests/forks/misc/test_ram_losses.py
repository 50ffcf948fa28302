import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.misc.ram_losses import HashingLossLayer
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import strict_excerpt

RNG = np.random.default_rng(5)


def _hashing(margin=3.0, tradeoff=0.5):
    return make_layer('type: "HashingLoss" hashing_loss_param { bi_margin: %r tradeoff: %r }'
                      % (margin, tradeoff))


class _HalvedPairs(HashingLossLayer):
    """The objective whose derivative the fork's gradient is: the pair sum halved."""

    def forward_cpu(self, bottom, top):
        super().forward_cpu(bottom, top)
        top[0].data[...] -= self.pair_loss / 2


def _codes(shape):
    """Codes away from the regulariser's kinks at 0 and +-1."""
    x = RNG.uniform(0.1, 0.9, shape) * RNG.choice([-1, 1], shape)
    return np.where(RNG.random(shape) < 0.3, x + np.sign(x) * 1.0, x)


def test_hashing_forward_and_backward_by_hand():
    x = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    layer, bottom, top = _hashing(), make_blobs([x, [0, 0, 1]]), make_blobs(1)
    # pairs: (0,1) similar d2 2; (0,2), (1,2) dissimilar d2 1 -> 3 - 1 each: 6 / (3 * 2) = 1;
    # regulariser: | |x| - 1 | sums to 2, times 0.5 / 3
    np.testing.assert_allclose(run_layer(layer, bottom, top)[0], 1.0 + 1.0 / 3)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    a, b = 1.0 / 6, 0.5 / 3
    want = a * np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]]) + b   # every sign is +1 here
    np.testing.assert_allclose(bottom[0].diff, want)


def test_hashing_multi_label_similarity():
    x = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    labels = [[1, 0, 1], [0, 0, 1], [0, 1, 0]]          # 0~1 share a label, 2 shares none
    loss = run_layer(_hashing(tradeoff=0.0), make_blobs([x, labels]), make_blobs(1))[0]
    np.testing.assert_allclose(loss, (2.0 + 2.0 + 2.0) / 6)
    loss = run_layer(_hashing(margin=0.5, tradeoff=0.0), make_blobs([x, labels]),
                     make_blobs(1))[0]
    np.testing.assert_allclose(loss, 2.0 / 6)


@pytest.mark.parametrize("labels", [[0, 1, 0, 2, 1], [[1, 0], [0, 1], [1, 1], [0, 1], [1, 0]]])
def test_hashing_gradient_of_the_halved_pair_objective(labels):
    lp = make_layer('type: "HashingLoss" hashing_loss_param { bi_margin: 6 tradeoff: 0.3 }')
    layer = _HalvedPairs(lp.layer_param)
    bottom = make_blobs([_codes((5, 3)), labels])
    check_layer_gradient(layer, bottom, make_blobs(1), check_bottom=[0])


def test_hashing_refusals():
    with pytest.raises(NetError, match="N x C"):
        _hashing().setup(make_blobs([np.ones((2, 3, 2, 2)), [0, 1]]), make_blobs(1))
    with pytest.raises(NetError, match="two items"):
        run_layer(_hashing(), make_blobs([np.ones((1, 3)), [0]]), make_blobs(1))


def test_set_loss2_by_hand():
    layer = make_layer('type: "SetLoss2" set_loss2_param { alpha: 0.4 }')
    bottom, top = make_blobs([[[0.0], [2.0], [2.0], [2.0]], [5, 5, 7, 7]]), make_blobs(1)
    # centres 1 and 2: 0.4 - 1 / 4 = 0.15, times 2 / (2 * 1)
    np.testing.assert_allclose(run_layer(layer, bottom, top)[0], 0.15)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff.ravel(), [0.25, 0.25, -0.25, -0.25])
    far = make_layer('type: "SetLoss2" set_loss2_param { alpha: 0.2 }')
    np.testing.assert_allclose(run_layer(far, bottom, top)[0], 0.0)


def test_set_loss2_gradient():
    layer = make_layer('type: "SetLoss2" set_loss2_param { alpha: 1.5 }')
    x = RNG.standard_normal((6, 2, 1, 2)) * 0.5
    x[4:] += 1.5                                     # the third identity's pairs are inactive
    bottom = make_blobs([x, [3, 3, 8, 8, 1, 1]])
    check_layer_gradient(layer, bottom, make_blobs(1), check_bottom=[0])


def test_var_loss_by_hand_and_gradient():
    layer = make_layer('type: "VarLoss"')
    bottom, top = make_blobs([[[0.0], [2.0], [1.0], [3.0]], [1, 1, 2, 2]]), make_blobs(1)
    np.testing.assert_allclose(run_layer(layer, bottom, top)[0], 4.0 / 2 / 4)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff.ravel(), [-0.25, 0.25, -0.25, 0.25])
    bottom = make_blobs([RNG.standard_normal((6, 3)), [4, 4, 4, 9, 9, 9]])
    check_layer_gradient(make_layer('type: "VarLoss"'), bottom, make_blobs(1), check_bottom=[0])


def test_blocks_must_divide_the_batch():
    for kind in ('"VarLoss"', '"SetLoss2"'):
        with pytest.raises(NetError, match="blocks of 2"):
            run_layer(make_layer("type: %s" % kind),
                      make_blobs([np.ones((3, 2)), [1, 1, 2]]), make_blobs(1))
    with pytest.raises(NetError, match="two identities"):
        run_layer(make_layer('type: "SetLoss2"'), make_blobs([np.ones((3, 2)), [1, 1, 1]]),
                  make_blobs(1))


NET = '''
name: "ram"
input: "data" input_shape { dim: 6 dim: 8 }
input: "label" input_shape { dim: 6 }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: 12 weight_filler { type: "xavier" } } }
layer {
  name: "loss"
  type: "HashingLoss"
  hashing_loss_param {
    bi_margin: 24.0
    tradeoff: 0.01
  }
  bottom: "ip1"
  bottom: "label"
  top: "loss"
}
layer {
  bottom: "ip1"  top: "conv-var" name: "conv-var"
  bottom: "label"  type: "VarLoss"  loss_weight: 1 }
layer {
  bottom: "ip1"  top: "conv-set" name: "conv-set"
  bottom: "label"  type: "SetLoss2"  set_loss2_param { alpha: 0.4  }
  loss_weight: 1}
'''


def test_net_excerpt_builds_and_trains(tmp_path):
    net = strict_excerpt(tmp_path, NET, caffe_pb2.TRAIN)
    net.blobs["data"].data[...] = RNG.standard_normal((6, 8))
    net.blobs["label"].data[...] = [0, 0, 3, 3, 5, 5]
    net.forward()
    net.backward()
    assert np.isfinite(net.blobs["ip1"].diff).all() and np.abs(net.blobs["ip1"].diff).sum() > 0
