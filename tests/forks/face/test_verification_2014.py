"""AlfredXiangWu/caffe's 2014 Distance, VerificationLoss, GaussianNoise
(forks/face/verification_2014.py)."""
import numpy as np

from caffepy.proto import caffe_pb2, io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_cosine_distance_value_and_gradient():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4, 1, 1)), rng.standard_normal((3, 4, 1, 1))
    layer = make_layer('type: "Distance" distance_param { type: COSINE }')
    y, = run_layer(layer, make_blobs([a, b]), make_blobs(1))
    A, B = a.reshape(3, 4), b.reshape(3, 4)
    want = 1 - (A * B).sum(1) / np.linalg.norm(A, axis=1) / np.linalg.norm(B, axis=1)
    np.testing.assert_allclose(y.ravel(), want)
    check_layer_gradient(layer, make_blobs([a, b]), make_blobs(1))


def test_verification_loss_margins_and_gradient():
    rng = np.random.default_rng(1)
    f1, f2 = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    l1 = np.array([0.0, 1.0, 2.0, 3.0])
    l2 = np.array([0.0, 1.0, 5.0, 6.0])          # items 0, 1 same; 2, 3 different
    layer = make_layer('type: "VerificationLoss" verification_param { m1: 0.5 m2: 3 }')
    loss, = run_layer(layer, make_blobs([f1, l1, f2, l2]), make_blobs(1))
    d = np.linalg.norm(f1 - f2, axis=1)
    want = sum(0.5 * (d[i] - 0.5) ** 2 for i in (0, 1) if d[i] > 0.5) + \
        sum(0.5 * (3 - d[i]) ** 2 for i in (2, 3) if d[i] < 3)
    np.testing.assert_allclose(float(loss), want / 4)
    check_layer_gradient(layer, make_blobs([f1, l1, f2, l2]), make_blobs(1), check_bottom=[0, 2])


def test_gaussian_noise_train_and_test():
    x = np.zeros((200, 50))
    y, = run_layer(make_layer('type: "GaussianNoise" gaussian_noise_param { std: 2 }',
                              phase=caffe_pb2.TRAIN), make_blobs([x]), make_blobs(1))
    assert abs(y.std() - 2) < 0.1 and abs(y.mean()) < 0.1
    layer = make_layer('type: "GaussianNoise" gaussian_noise_param { std: 2 }')
    y, = run_layer(layer, make_blobs([x + 1]), make_blobs(1))
    np.testing.assert_array_equal(y, x + 1)
    check_layer_gradient(layer, make_blobs([np.random.default_rng(2).standard_normal((2, 3))]),
                         make_blobs(1))


def test_v1_file_reads():
    net = io.read_net('layers { name: "d" type: DISTANCE bottom: "a" bottom: "b" top: "c" '
                      'distance_param { type: COSINE } } layers { name: "v" '
                      'type: VERIFICATION_LOSS bottom: "a" bottom: "l" bottom: "b" bottom: "m" '
                      'top: "loss" verification_param { m1: 1 m2: 2 } }')
    assert [l.type for l in net.layer] == ["Distance", "VerificationLoss"]
    assert net.layer[1].verification_param.m2 == 2


def test_verification_and_triplet_accuracy_and_binary_label():
    f1 = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    f2 = np.array([[0.5, 0.0], [2.0, 0.0], [1.2, 0.0]])       # d = 0.5, 2, 1.2
    l1, l2 = np.array([1.0, 1.0, 1.0]), np.array([1.0, 2.0, 1.0])
    acc, = run_layer(make_layer('type: "VerificationAccuracy" verification_param { m1: 1 m2: 3 }'),
                     make_blobs([f1, l1, f2, l2]), make_blobs(1))
    # inside: 0.5 <= 1 yes; 2 >= 3 no; 1.2 <= 1 no. one threshold 2: 0.5 < 2 yes, 2 > 2 no,
    # 1.2 < 2 yes
    np.testing.assert_allclose(acc.ravel(), [1 / 3.0, 2 / 3.0])
    a = np.zeros((2, 2))
    pos, neg = np.array([[1.0, 0], [3.0, 0]]), np.array([[2.0, 0], [2.0, 0]])
    acc, = run_layer(make_layer('type: "TripletAccuracy" triplet_loss_param { alpha: 1 }'),
                     make_blobs([a, pos, neg]), make_blobs(1))
    np.testing.assert_allclose(acc.ravel(), [0.5])           # 1 - 4 + 1 < 0; 9 - 4 + 1 not
    lab, = run_layer(make_layer('type: "BinaryLabel"'), make_blobs([l1, l2]), make_blobs(1))
    np.testing.assert_array_equal(lab, [1.0, 0.0, 1.0])
    lab, = run_layer(make_layer('type: "BinaryLabel" binary_label_param { negative_target: -1 }'),
                     make_blobs([l1, l2]), make_blobs(1))
    np.testing.assert_array_equal(lab, [1.0, -1.0, 1.0])
