"""JiajianZeng/ContextWithStructure's PatchSemantic: the fiducial cells and derivatives worked out
by hand from the fork's patch_semantic_layer.cu, its spatial-operation chain, an excerpt."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.face.patch_semantic import _spatial_operations
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer, run_layer

from ..nets import strict_excerpt

RNG = np.random.default_rng(11)

_ONE_POOL = ('type: "PatchSemantic" patch_semantic_param { num_landmark: 1 image_w: 8 image_h: 8 '
             'patch_w: 2 patch_h: 2 spatial_operation_param { name: "pool" kernel_size: 2 '
             'stride: 2 weight: 2 used: true } }')


def test_derivatives_by_hand():
    # F[h, w] = 10 h + w^2 on a 4 x 4 map; cells see [2w, 2w + 2] x [2h, 2h + 2] of the 8 x 8 image
    f = (10.0 * np.arange(4)[:, None] + np.arange(4)[None, :] ** 2)[None, None]
    # ground truth (0.3, 0.3): pixel (3, 3), patch [2, 4]^2 = the box of cell (1, 1)
    # prediction (0.9, 0.1): pixel (8, 1), patch [7, 8] x [0, 2]: cell (0, 3), IoU 2 / 4
    gt, pred = [[0.3, 0.3]], [[0.9, 0.1]]
    for dtype in (np.float64, np.float32):
        layer = make_layer(_ONE_POOL, dtype=dtype)
        out = run_layer(layer, make_blobs([gt, pred, f], dtype=dtype), make_blobs(1, dtype=dtype))[0]
        assert out.shape == (1, 1, 3, 1)
        # cell (1, 1), block right / down: Dx = (14 - 11) + (24 - 21) = 6, Dy = (21 - 11) + (24 - 14) = 20
        # cell (0, 3), block left / down: Dx = (9 - 4) + (19 - 14) = 10, Dy = (19 - 9) + (14 - 4) = 20
        # Fx = (6 + 10) / 4 = 4, Fy = 10; the column signs differ (+1, -1), neither cell in column 0:
        # both -1: Ft = ((9 + 4 + 19 + 14) - (11 + 10 + 21 + 20)) / 4 = -4; weight 2
        np.testing.assert_allclose(out.reshape(-1), [8.0, 20.0, -8.0])


def test_no_overlap_takes_cell_zero_and_ties_go_to_the_nearest_centre():
    layer = make_layer(_ONE_POOL.replace("patch_w: 2 patch_h: 2", "patch_w: 0 patch_h: 0"))
    f = make_blobs([RNG.standard_normal((1, 1, 4, 4))])[0]
    layer.setup(make_blobs([[[0.5, 0.5]], [[0.5, 0.5]], f.data]), make_blobs(1))
    op = layer.used[0]
    grid = layer._grid(op, (4, 4), np.float64, layer.image)
    assert layer._fiducial(np.array([0.5, 0.5]), op, grid) == (0, 0)      # a zero-area patch
    wide = make_layer(_ONE_POOL.replace("patch_w: 2 patch_h: 2", "patch_w: 8 patch_h: 2"))
    wide.setup(make_blobs([[[0.5, 0.5]], [[0.5, 0.5]], f.data]), make_blobs(1))
    # pixel (6, 4): patch [2, 10] -> [2, 8] x [3, 5]; cells (1, 1..3) and (2, 1..3) tie at IoU 2 / 14;
    # centres (2w + 1, 2h + 1) nearest (6, 4): (h, w) = (1, 2), (1, 3), (2, 2), (2, 3) at 1 + 1:
    # the first in row-major order, (1, 2)
    assert wide._fiducial(np.array([0.75, 0.5]), op, grid) == (1, 2)


def test_spatial_operations_follow_one_another():
    lp = make_layer('type: "PatchSemantic" patch_semantic_param { '
                    'spatial_operation_param { kernel_size: 3 stride: 1 } '
                    'spatial_operation_param { kernel_size: 2 stride: 2 used: true } '
                    'spatial_operation_param { kernel_w: 3 kernel_h: 5 stride_w: 1 stride_h: 2 '
                    'used: true weight: 0.5 } }').layer_param
    ops = _spatial_operations(None, lp.patch_semantic_param.spatial_operation_param)
    assert [op["field"] for op in ops] == [(3, 3), (4, 4), (8, 12)]
    assert [op["accum"] for op in ops] == [(1, 1), (2, 2), (2, 4)]
    assert [op["used"] for op in ops] == [False, True, True] and ops[2]["weight"] == 0.5


def test_refusals():
    x = make_blobs([np.zeros((1, 2)), np.zeros((1, 2)), np.zeros((1, 1, 4, 4))])
    no_stride = _ONE_POOL.replace("stride: 2 ", "")
    with pytest.raises(NetError, match="stride is stride OR"):
        make_layer(no_stride).setup(x, make_blobs(1))
    with pytest.raises(NetError, match="2 feature bottoms for 1 used"):
        make_layer(_ONE_POOL).setup(x + make_blobs([np.zeros((1, 1, 4, 4))]), make_blobs(1))
    thin = make_blobs([np.zeros((1, 2)), np.zeros((1, 2)), np.zeros((1, 1, 1, 4))])
    with pytest.raises(NetError, match="at least 2 x 2"):
        run_layer(make_layer(_ONE_POOL), thin, make_blobs(1))


def test_no_gradient_reaches_the_bottoms():
    layer = make_layer(_ONE_POOL)
    bottom = make_blobs([RNG.uniform(0, 1, (2, 2)), RNG.uniform(0, 1, (2, 2)),
                         RNG.standard_normal((2, 3, 4, 4))])
    top = make_blobs(1)
    run_layer(layer, bottom, top)
    for b in bottom:
        b.diff[...] = 1.0
    layer.backward(top, [True, True, True], bottom)
    assert not any(b.diff.any() for b in bottom)


NET = '''
name: "percep_excerpt"
input: "data" input_shape { dim: 2 dim: 3 dim: 32 dim: 32 }
input: "lm_landmark" input_shape { dim: 2 dim: 12 }
layer { name: "lm_fc2" type: "InnerProduct" bottom: "data" top: "lm_fc2"
  inner_product_param { num_output: 12 weight_filler { type: "xavier" } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 5 stride: 2 weight_filler { type: "xavier" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "p_s" type: "PatchSemantic" bottom: "lm_landmark" bottom: "lm_fc2" bottom: "pool1"
  top: "partial_derivatives"
  patch_semantic_param { num_landmark: 6 cross_channel: AVE image_w: 32 image_h: 32
    patch_w: 6 patch_h: 6
    spatial_operation_param { name: "conv1" kernel_size: 5 stride: 2 weight: 0 used: false }
    spatial_operation_param { name: "pool1" kernel_size: 2 stride: 2 weight: 1 used: true } } }
layer { name: "eltwise_sub" type: "Eltwise" bottom: "lm_fc2" bottom: "lm_landmark"
  top: "residuals" eltwise_param { operation: SUM coeff: 1 coeff: -1 } }
layer { name: "perceptual_loss" type: "PerceptualLoss" bottom: "residuals"
  bottom: "partial_derivatives" top: "perceptual_loss" loss_weight: 0.1
  perceptual_loss_param { num_landmark: 6 epsilon: 0.001 } }
'''


def test_excerpt_summary_strict_and_forward(tmp_path):
    net = strict_excerpt(tmp_path, NET, caffe_pb2.TRAIN)
    net.blobs["data"].data[...] = RNG.standard_normal((2, 3, 32, 32))
    net.blobs["lm_landmark"].data[...] = RNG.uniform(0, 1, (2, 12))
    net.forward()
    net.backward()
    assert net.blobs["partial_derivatives"].shape == (2, 6, 3, 1)
    assert np.isfinite(net.blobs["perceptual_loss"].data).all()
