"""CRF-as-RNN (torrvision/caffe): MultiStageMeanfield and the FCN-era V1 CROP (forks/segmentation/crfasrnn.py,
caffepy/proto/v1_crop.py)."""
import numpy as np
import pytest

from caffepy.errors import NetError, ProtoError
from caffepy.net import Net
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

MF = ('type: "MultiStageMeanfield" multi_stage_meanfield_param { num_iterations: %d '
      'theta_alpha: 2 theta_beta: 3 theta_gamma: 1 spatial_filter_weight: 3 '
      'bilateral_filter_weight: 5 }')


def test_meanfield_two_pixels_by_hand():
    # 1 x 2 image, 2 classes, 2 iterations. Pixel distance 1: spatial kernel exp(-1/2),
    # bilateral exp(-1/8 - 3/2) (positions / 2; rgb (0, 0, 0) vs (3, 3, 3), / 3).
    u = np.array([[[[1.0, 0.0]], [[0.0, 1.0]]]])
    img = np.zeros((1, 3, 1, 2))
    img[0, :, 0, 1] = 3.0
    layer = make_layer(MF % 2)
    y, = run_layer(layer, make_blobs([u, u.copy(), img]), make_blobs(1))
    ks, kb = np.exp(-0.5), np.exp(-0.125 - 1.5)
    want = u[0].reshape(2, 2)
    q = want
    for _ in range(2):
        prob = np.exp(q) / np.exp(q).sum(axis=0)
        s = (np.array([[1, ks], [ks, 1]]) @ prob.T).T / (1 + ks)
        b = (np.array([[1, kb], [kb, 1]]) @ prob.T).T / (1 + kb)
        q = want + (3 * s + 5 * b)                  # W_c = -I, W_s = 3 I, W_b = 5 I
    np.testing.assert_allclose(y.reshape(2, 2), q, rtol=1e-5)
    # same colour and unary at both pixels: every filter returns prob itself, so
    # Q1 = U + 8 softmax(U) = (1 + 8 * 0.7310586, 8 * 0.2689414) = (6.848469, 2.151531),
    # Q2 = U + 8 softmax(Q1) = (1 + 8 * 0.9909593, 8 * 0.0090407)
    u2 = np.array([[[[1.0, 1.0]], [[0.0, 0.0]]]])
    y2, = run_layer(make_layer(MF % 2), make_blobs([u2, u2.copy(), np.ones((1, 3, 1, 2))]),
                    make_blobs(1))
    np.testing.assert_allclose(y2[0, :, 0, 0], [8.927674, 0.072326], atol=2e-5)
    np.testing.assert_allclose(y2[0, :, 0, 1], y2[0, :, 0, 0])


def test_meanfield_gradient_and_refusals():
    rng = np.random.default_rng(0)
    u, q0 = rng.standard_normal((2, 2, 3, 2, 3)) * 0.5
    img = rng.uniform(0, 4, (2, 3, 2, 3))
    layer = make_layer(MF.replace("}", 'spatial_filter_weights_str: "1 2 0.5" }') % 3)
    check_layer_gradient(layer, make_blobs([u, q0, img]), make_blobs(1), check_bottom=[0, 1])
    with pytest.raises(NetError, match="greater than 1"):
        run_layer(make_layer(MF % 1), make_blobs([u, q0, img]), make_blobs(1))
    with pytest.raises(NetError, match="one per class"):
        run_layer(make_layer(MF.replace("}", 'bilateral_filter_weights_str: "1 2" }') % 2),
                  make_blobs([u, q0, img]), make_blobs(1))


@pytest.mark.slow
def test_meanfield_lattice_above_max_pixels(monkeypatch, caplog):
    # above MAX_PIXELS the fork's permutohedral lattice filters: forward / backward (the
    # transposed lattice filter) gradient-checked on a small case with the limit lowered to 0
    from caffepy.forks.segmentation import crfasrnn
    rng = np.random.default_rng(3)
    u, q0 = rng.standard_normal((2, 1, 3, 4, 5)) * 0.5
    img = rng.uniform(0, 6, (1, 3, 4, 5))
    dense, = run_layer(make_layer(MF % 3), make_blobs([u, q0, img]), make_blobs(1))
    monkeypatch.setattr(crfasrnn, "MAX_PIXELS", 0)
    with caplog.at_level("INFO", logger="caffepy"):
        lattice, = run_layer(make_layer(MF % 3), make_blobs([u, q0, img]), make_blobs(1))
    assert "permutohedral lattice" in caplog.text
    # the same mean field up to the lattice's approximation (see test_permutohedral.py)
    assert 0 < np.abs(lattice - dense).max() < 0.5
    # that path's float32 (as the fork's lattice) is too coarse for central differences with
    # step 1e-3: the gradient is checked in float64 (the same lattice filter)
    monkeypatch.setattr(crfasrnn, "LATTICE_DTYPE", np.float64)
    layer = make_layer(MF.replace("}", 'spatial_filter_weights_str: "1 2 0.5" }') % 3)
    check_layer_gradient(layer, make_blobs([u, q0, img]), make_blobs(1), check_bottom=[0, 1])


@pytest.mark.slow
def test_meanfield_500x500_forward():
    # CRF-RNN's deploy nets: 500 x 500, 21 classes, 10 iterations, theta 160 / 3 / 3. Measured
    # on 2 shared cores with numba: about 13 s (the bilateral lattice of this noisy image has ~1.2M
    # vertices; 22 lattice filterings of 21 channels)
    rng = np.random.default_rng(0)
    u = rng.standard_normal((1, 21, 500, 500)).astype(np.float32)
    y, x = np.mgrid[0:500, 0:500]
    img = np.stack([x / 3.0, y / 3.0, (x + y) / 6.0])[None] + rng.normal(0, 5, (1, 3, 500, 500))
    param = ('type: "MultiStageMeanfield" multi_stage_meanfield_param { num_iterations: 10 '
             'theta_alpha: 160 theta_beta: 3 theta_gamma: 3 spatial_filter_weight: 3 '
             'bilateral_filter_weight: 5 }')
    top, = run_layer(make_layer(param), make_blobs([u, u.copy(), img]), make_blobs(1))
    assert top.shape == (1, 21, 500, 500) and np.isfinite(top).all()
    # W_c = -I: the top is U + 3 S + 5 B with S, B normalised filterings of probabilities
    assert np.all(top - u >= -1e-4) and np.all(top - u <= 8 * 1.05)


FCN_V1 = """name: "fcn" input: "data" input_dim: 1 input_dim: 3 input_dim: 12 input_dim: 12
layers { bottom: "data" top: "conv1" name: "conv1" type: CONVOLUTION
  convolution_param { num_output: 2 kernel_size: 3 pad: 5 } }
layers { bottom: "conv1" top: "conv1" name: "relu1" type: RELU }
layers { bottom: "conv1" top: "pool1" name: "pool1" type: POOLING
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layers { bottom: "pool1" top: "score" name: "score" type: CONVOLUTION
  convolution_param { num_output: 2 kernel_size: 1 } }
layers { bottom: "score" top: "up" name: "up" type: DECONVOLUTION
  convolution_param { num_output: 2 kernel_size: 4 stride: 2 bias_term: false } }
layers { type: CROP name: "crop" bottom: "up" bottom: "data" top: "out" }
layers { bottom: "out" top: "unary" top: "q0" name: "split" type: SPLIT }
layers { bottom: "unary" bottom: "q0" bottom: "data" top: "pred" name: "crf"
  type: MULTI_STAGE_MEANFIELD multi_stage_meanfield_param { num_iterations: 2 theta_alpha: 4
  theta_beta: 3 theta_gamma: 2 } }
"""


def test_v1_crop_offsets_from_coordinate_maps(tmp_path):
    path = tmp_path / "fcn.prototxt"
    path.write_text(FCN_V1)
    net = Net(str(path), 1)
    crop = [lp for lp in net.net_param.layer if lp.name == "crop"][0]
    # conv1 (k 3, pad 5): x -> x + 4; pool (k 2, s 2): x -> (x - 0.5) / 2; score: identity;
    # up (k 4, s 2): x -> 2x + 1.5. data -> up: 2 ((x + 4 - 0.5) / 2) + 1.5 = x + 5: offset 5
    assert crop.type == "Crop" and list(crop.crop_param.offset) == [5, 5]
    assert net.blobs["up"].shape == (1, 2, 22, 22) and net.blobs["pred"].shape == (1, 2, 12, 12)
    net.blobs["data"].data[...] = np.random.default_rng(1).uniform(0, 1, (1, 3, 12, 12))
    net.forward()
    np.testing.assert_array_equal(net.blobs["out"].data, net.blobs["up"].data[:, :, 5:17, 5:17])
    # k 5, pad 0: x -> x - 2, so data -> up is x - 1: bottom 0 would start before bottom 1
    path.write_text(FCN_V1.replace("kernel_size: 3 pad: 5", "kernel_size: 5"))
    with pytest.raises(ProtoError, match="non-positive shift"):
        Net(str(path), 1)
