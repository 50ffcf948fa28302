import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_insanity_test_phase_uses_mean_slope():
    x = np.array([[-3.0, 0.0, 2.0]])
    layer = make_layer('type: "Insanity" insanity_param { lb: 2 ub: 8 }')
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    a = 6 / np.log(4.0)
    np.testing.assert_allclose(y, [[-3 / a, 0, 2]])
    x = np.random.default_rng(0).standard_normal((2, 3))
    check_layer_gradient(make_layer('type: "Insanity"'), make_blobs([x]), make_blobs(1))


def test_insanity_train_draws_slopes_in_bounds():
    x = -np.ones((4, 50))
    layer = make_layer('type: "Insanity"', phase=caffe_pb2.TRAIN)
    bottom, top = make_blobs([x]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    slope = -1 / y
    assert slope.min() >= 5 and slope.max() < 10 and slope.std() > 0.5
    top[0].diff[...] = 1.0
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, 1 / slope)


def test_insanity_rejects_bad_bounds():
    with pytest.raises(NetError, match="ub"):
        run_layer(make_layer('type: "Insanity" insanity_param { lb: 3 ub: 2 }'),
                  make_blobs([np.ones((1, 2))]), make_blobs(1))


GCL = 'type: "GeneralContrastiveLoss" general_contrastive_loss_param { %s }'


def test_general_contrastive_loss_values():
    d = np.array([[0.5, 0.2, 1.5], [2.0, 0.9, 0.1]])
    lab = np.array([0, 2])
    layer = make_layer(GCL % "positive_margin: 0.1 negative_margin: 1 negative_weight: 2")
    bottom, top = make_blobs([d, lab]), make_blobs(2)
    loss, dist = run_layer(layer, bottom, top)
    # row 0: positive 0.4; negatives (1 - 0.2) * 2; row 1: positive 0; negative (1 - 0.9) * 2
    assert float(loss) == pytest.approx((0.4 + 1.6 + 0.2) / 2)
    np.testing.assert_allclose(dist, [0.4 / 2, (0.8 + 0.1) / 2 / 2])
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, [[0.5, -1, 0], [0, -1, 0]])


def test_general_contrastive_loss_gradient_and_normalize():
    rng = np.random.default_rng(1)
    d = rng.uniform(0.1, 0.9, (3, 4))
    lab = np.array([1, 0, 3])
    check_layer_gradient(make_layer(GCL % "positive_margin: 0"), make_blobs([d, lab]),
                         make_blobs(1), check_bottom=[0])
    layer = make_layer(GCL % "normalize_negative: 1")
    bottom, top = make_blobs([d, lab]), make_blobs(1)
    run_layer(layer, bottom, top)
    layer.backward(top, [True, False], bottom)
    # 3 negatives per row, each -1: s = 9 / 1 / 3 = 3 > 1, so negatives become -1 / 3, then / N
    g = np.full((3, 4), -1 / 3 / 3)
    g[np.arange(3), lab] = 1 / 3
    np.testing.assert_allclose(bottom[0].diff, g)


def test_general_contrastive_loss_positive_first_and_refusal():
    d = np.array([[1.5, 0.2]])
    layer = make_layer(GCL % "positive_first: true")
    bottom, top = make_blobs([d, np.array([0])]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    assert float(loss) == pytest.approx(1.5)
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, [[1, 0]])
    with pytest.raises(NetError, match="max_negative_only"):
        run_layer(make_layer(GCL % "max_negative_only: true"), make_blobs([d, np.array([0])]),
                  make_blobs(1))


def test_insanity_param_accepted_in_strict_mode(tmp_path):
    from caffepy.net import Net
    path = tmp_path / "net.prototxt"
    path.write_text('input: "data" input_shape { dim: 1 dim: 2 }\n'
                    'layer { name: "r" type: "Insanity" bottom: "data" top: "y"\n'
                    '  insanity_param { lb: 3 ub: 8 } }\n')
    Net(str(path), caffe_pb2.TEST)


def test_triplet_loss_values_and_gradient():
    a = np.array([[0.0, 1.0], [1.0, 0.0]])
    p = np.array([[0.0, 0.5], [1.0, 0.0]])
    n = np.array([[0.0, 0.0], [1.0, 3.0]])
    layer = make_layer('type: "TripletLoss" triplet_loss_param { margin: 1 }')
    bottom, top = make_blobs([a, p, n]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    # row 0: 1 + 0.25 - 1 = 0.25; row 1: 1 + 0 - 9 < 0
    assert float(loss) == pytest.approx(0.25 / 2 / 2)
    top[0].diff[...] = 1.0
    layer.backward(top, [True] * 3, bottom)
    np.testing.assert_allclose(bottom[0].diff, [[0, -0.25], [0, 0]])
    np.testing.assert_allclose(bottom[1].diff, [[0, -0.25], [0, 0]])
    np.testing.assert_allclose(bottom[2].diff, [[0, 0.5], [0, 0]])
    rng = np.random.default_rng(2)
    x = [rng.standard_normal((4, 3, 1, 1)) * 0.5 for _ in range(3)]
    check_layer_gradient(make_layer('type: "TripletLoss" triplet_loss_param { margin: 2 }'),
                         make_blobs(x), make_blobs(1))


def test_eltwise_affine_gradient_and_shared():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 2, 2))
    layer = make_layer('type: "EltwiseAffine"')
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, x * 1.0001 + 0.0001)
    text = ('type: "EltwiseAffine" eltwise_affine_param { channel_shared: %s slope_filler '
            '{ type: "gaussian" } bias_filler { type: "gaussian" } }')
    for shared in ("false", "true"):
        check_layer_gradient(make_layer(text % shared), make_blobs([x]), make_blobs(1))


def test_local_matches_a_per_position_filter_and_gradient():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 2, 4, 4))
    text = ('type: "Local" local_param { num_output: 3 kernel_size: 3 stride: 1 pad: 1 '
            'weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" } }')
    layer = make_layer(text)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert y.shape == (2, 3, 4, 4)
    w = layer.blobs[0].data.reshape(3, 2, 3, 3, 4, 4)
    b = layer.blobs[1].data.reshape(3, 4, 4)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros_like(y)
    for i in range(4):
        for j in range(4):
            patch = xp[:, :, i:i + 3, j:j + 3]
            ref[:, :, i, j] = np.einsum("nckl,mckl->nm", patch, w[:, :, :, :, i, j]) + b[:, i, j]
    np.testing.assert_allclose(y, ref)
    layer = make_layer(text.replace("stride: 1 pad: 1", "stride: 2 pad: 0"))
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def test_v1_triplet_local_affine_nets_build():
    from caffepy.net import Net
    from caffepy.proto import io
    text = '''
input: "a" input_shape { dim: 2 dim: 2 dim: 4 dim: 4 }
layers { name: "loc" type: LOCAL bottom: "a" top: "l"
         local_param { num_output: 2 kernel_size: 3 weight_filler { type: "xavier" } } }
layers { name: "aff" type: ELTWISE_AFFINE bottom: "l" top: "l" }
layers { name: "ins" type: INSANITY bottom: "l" top: "l" insanity_param { lb: 3 ub: 6 } }
'''
    net = Net(io.read_net(text), phase=caffe_pb2.TEST)
    assert [l.type for l in net.layers][1:] == ["Local", "EltwiseAffine", "Insanity"]
    net.forward()
    assert net.blobs["l"].shape == (2, 2, 2, 2)
