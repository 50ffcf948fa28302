"""C3D v1.0's voxel-wise softmax and softmax loss (video-to-video nets)."""
import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(13)


def test_voxel_softmax():
    x = RNG.standard_normal((2, 3, 2, 2, 3))
    (y,) = run_layer(make_layer('type: "VoxelWiseSoftmax"'), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, np.exp(x) / np.exp(x).sum(axis=1, keepdims=True))
    check_layer_gradient(make_layer('type: "VoxelWiseSoftmax"'), make_blobs([x]), make_blobs(1))


def test_voxel_softmax_loss_numbers_and_gradient():
    x = RNG.standard_normal((2, 3, 2, 2, 2))
    lab = RNG.integers(0, 3, (2, 1, 2, 2, 2)).astype(float)
    lab[0, 0, 0, 0, 0] = 7                                   # >= C: no loss term (fork)
    (loss,) = run_layer(make_layer('type: "VoxelWiseSoftmaxWithLoss"'), make_blobs([x, lab]),
                        make_blobs(1))
    p = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    terms = [-np.log(p[n, int(lab[n, 0, l, h, w]), l, h, w])
             for n in range(2) for l in range(2) for h in range(2) for w in range(2)
             if lab[n, 0, l, h, w] < 3]
    assert np.isclose(loss, sum(terms) / 16)                 # divided by every voxel
    lab[0, 0, 0, 0, 0] = 1                                   # gradient check on valid labels
    check_layer_gradient(make_layer('type: "VoxelWiseSoftmaxWithLoss"'), make_blobs([x, lab]),
                         make_blobs(1), check_bottom=[0])
