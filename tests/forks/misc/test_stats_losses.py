import numpy as np
import pytest

from caffepy.proto import io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step


def _pairs(seed=0):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    b[2] = a[2] + 0.05                   # a dissimilar pair inside the margin
    return a, b, np.array([1.0, 0.0, 0.0, 1.0])


def test_mine_contrastive_forward():
    a, b, y = _pairs()
    (loss,) = run_layer(make_layer('type: "MineContrastiveLoss" '
                                   'mine_contrastive_loss_param { margin: 2 }'),
                        make_blobs([a, b, y]), make_blobs(1))
    d = np.linalg.norm(a - b, axis=1)
    ref = sum(d[n] ** 2 if y[n] else max(2 - d[n], 0) ** 2 for n in range(4)) / 4 / 2
    assert float(loss) == pytest.approx(ref)


def test_mine_contrastive_gradient():
    a, b, y = _pairs(1)
    b[1] = a[1] + 0.1
    check_layer_gradient(make_layer('type: "MineContrastiveLoss" loss_weight: 3 '
                                    'mine_contrastive_loss_param { margin: 1.5 }'),
                         make_blobs([a, b, y]), make_blobs(1), check_bottom=[0, 1])


def test_mine_contrastive_v1_takes_three_or_more_bottoms():
    net = proto_io.read_net('''name: "t" input: "a" input_dim: 2 input_dim: 3 input_dim: 1
      input_dim: 1 input: "b" input_dim: 2 input_dim: 3 input_dim: 1 input_dim: 1
      input: "y" input_dim: 2 input_dim: 1 input_dim: 1 input_dim: 1
      layers { name: "loss" type: MINE_CONTRASTIVE_LOSS bottom: "a" bottom: "b" bottom: "y"
               top: "loss" mine_contrastive_loss_param { margin: 1 } }''')
    assert net.layer[-1].type == "MineContrastiveLoss"
    with pytest.raises(Exception, match="at least 3 bottom"):
        run_layer(make_layer('type: "MineContrastiveLoss"'),
                  make_blobs([np.zeros((2, 3))] * 2), make_blobs(1))
    a, b, y = _pairs()
    three = run_layer(make_layer('type: "MineContrastiveLoss"'), make_blobs([a, b, y]),
                      make_blobs(1))
    four = run_layer(make_layer('type: "MineContrastiveLoss"'),
                     make_blobs([a, b, y, np.arange(4.0)]), make_blobs(1))
    assert float(three[0]) == float(four[0])


def test_contrastive_with_four_bottoms_is_the_margin_on_d2_form():
    a, b, y = _pairs(2)
    b[1] = a[1] + 0.3                    # dissimilar, d^2 = 0.27 < margin
    extra = np.array([5.0, 6.0, 7.0, 8.0])
    four = 'bottom: "a" bottom: "b" bottom: "y" bottom: "y_p" '
    (loss,) = run_layer(make_layer('type: "ContrastiveLoss" ' + four +
                                   'contrastive_loss_param { margin: 1 }'),
                        make_blobs([a, b, y, extra]), make_blobs(1))
    d2 = np.sum((a - b) ** 2, axis=1)
    ref = sum(d2[n] if y[n] else max(1 - d2[n], 0) for n in range(4)) / 4 / 2
    assert float(loss) == pytest.approx(ref)
    check_layer_gradient(make_layer('type: "ContrastiveLoss" loss_weight: 2 ' + four +
                                    'contrastive_loss_param { margin: 1 }'),
                         make_blobs([a, b, y, extra]), make_blobs(1), check_bottom=[0, 1])


def test_contrastive_v1_with_four_bottoms_builds():
    net = proto_io.read_net('''name: "t" input: "a" input_dim: 2 input_dim: 3 input_dim: 1
      input_dim: 1 input: "b" input_dim: 2 input_dim: 3 input_dim: 1 input_dim: 1
      input: "y" input_dim: 2 input_dim: 1 input_dim: 1 input_dim: 1
      layers { name: "loss" type: CONTRASTIVE_LOSS bottom: "a" bottom: "b" bottom: "y"
               bottom: "y" top: "loss" contrastive_loss_param { margin: 1 } }''')
    assert net.layer[-1].type == "ContrastiveLoss"


def test_classification_stats_hand_checked():
    scores = np.array([[0.9, 0.1, -0.2],      # label 0, right
                       [0.2, 0.5, 0.3],       # label 2, wrong (1)
                       [-0.1, -0.3, -0.05],   # label 2, right
                       [0.4, 0.6, 0.0]])      # label 1, right
    labels = np.array([0, 2, 2, 1.0])
    acc, ap, total = run_layer(make_layer('type: "ClassificationStats" '
                                          'classification_stats_param { num_classes: 3 }'),
                               make_blobs([scores, labels]), make_blobs(3))
    assert acc.shape == ap.shape == (1, 3, 1, 1) and total.shape == (1, 1, 1, 1)
    np.testing.assert_allclose(acc.ravel(), [1.0, 1.0, 0.5])
    assert total.item() == pytest.approx(0.75)
    # the fork's lists hold N = 4 placeholders (0, not positive) besides the items, and only
    # their first N entries count. class 0: 0.9+ first: AP 1. class 1: 0.6+ first: AP 1.
    # class 2: 0.3+, then five entries at 0 (four placeholders, item 3) push -0.05+ past rank
    # 4: AP = (1/1) / 2 items
    np.testing.assert_allclose(ap.ravel(), [1.0, 1.0, 0.5])


def test_classification_stats_v1_and_required_field():
    net = proto_io.read_net('''name: "t" input: "s" input_dim: 2 input_dim: 3 input_dim: 1
      input_dim: 1 input: "l" input_dim: 2 input_dim: 1 input_dim: 1 input_dim: 1
      layers { name: "st" type: CLASSIFICATION_STATS bottom: "s" bottom: "l" top: "a" top: "p"
               top: "t" classification_stats_param { num_classes: 3 } }''')
    assert net.layer[-1].type == "ClassificationStats"
    with pytest.raises(Exception, match="num_classes is required"):
        run_layer(make_layer('type: "ClassificationStats"'),
                  make_blobs([np.zeros((2, 3)), np.zeros(2)]), make_blobs(3))


NET = '''
layer { name: "data" type: "Input" top: "data" top: "data_p" top: "sim" top: "label"
        input_param { shape { dim: 2 dim: 4 } shape { dim: 2 dim: 4 } shape { dim: 2 }
                      shape { dim: 2 } } }
layer { name: "f" type: "InnerProduct" bottom: "data" top: "f" param { name: "w" }
        inner_product_param { num_output: 3 bias_term: false weight_filler { type: "xavier" } } }
layer { name: "f_p" type: "InnerProduct" bottom: "data_p" top: "f_p" param { name: "w" }
        inner_product_param { num_output: 3 bias_term: false weight_filler { type: "xavier" } } }
layer { name: "loss" type: "MineContrastiveLoss" bottom: "f" bottom: "f_p" bottom: "sim"
        top: "loss" mine_contrastive_loss_param { margin: 1 } }
layer { name: "stats" type: "ClassificationStats" bottom: "f" bottom: "label"
        top: "acc" top: "ap" top: "total" classification_stats_param { num_classes: 3 } }
'''


def test_small_net():
    forward(NET, labels=2)
    train_step(NET, labels=2)
