import numpy as np
import pytest
from scipy.io import savemat

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_spatial_product_forward_and_gradient():
    rng = np.random.default_rng(0)
    x, m = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 1, 4, 5))
    layer = make_layer('type: "SpatialProduct"')
    top, = run_layer(layer, make_blobs([x, m]), make_blobs(1))
    np.testing.assert_allclose(top, x * m)
    check_layer_gradient(make_layer('type: "SpatialProduct"'), make_blobs([x, m]), make_blobs(1))
    with pytest.raises(CaffeError, match="one channel"):
        run_layer(make_layer('type: "SpatialProduct"'), make_blobs([x, x]), make_blobs(1))


def test_unique_label_sorted_padded_with_forced_and_ignored():
    lab = np.array([[[[3, 255, 0], [3, 7.5, 255.5]]], [[[1, 1, 1], [1, 1, 1]]]])
    layer = make_layer('type: "UniqueLabel" unique_label_param { max_labels: 5 '
                       'ignore_label: 255 force_label: 0 }')
    top, = run_layer(layer, make_blobs([lab]), make_blobs(1))
    assert top.shape == (2, 5, 1, 1)
    np.testing.assert_array_equal(top[:, :, 0, 0], [[0, 3, 7.5, -1, -1], [0, 1, -1, -1, -1]])
    small = make_layer('type: "UniqueLabel" unique_label_param { max_labels: 2 }')
    with pytest.raises(CaffeError, match="5 distinct labels"):
        run_layer(small, make_blobs([lab]), make_blobs(1))


def test_bias_channel_image_labels():
    x = np.zeros((1, 4, 2, 2))
    lab = np.array([0, 2, 2, -1, 255]).reshape(1, 5, 1, 1)
    layer = make_layer('type: "BiasChannel" bias_channel_param { bg_bias: 1.5 fg_bias: 3 '
                       'ignore_label: 255 }')
    top, = run_layer(layer, make_blobs([x, lab]), make_blobs(1))
    np.testing.assert_array_equal(top[0, :, 0, 0], [1.5, 0, 6, 0])  # label 2 listed twice
    check_layer_gradient(layer, make_blobs([np.ones_like(x), lab]), make_blobs(1),
                         check_bottom=[0])
    with pytest.raises(CaffeError, match="unexpected label 4"):
        run_layer(layer, make_blobs([x, np.array([4.0]).reshape(1, 1, 1, 1)]), make_blobs(1))


def test_bias_channel_pixel_labels_with_and_without_background():
    x = np.zeros((1, 3, 1, 4))
    lab = np.array([0, 2, 255, 1]).reshape(1, 1, 1, 4)
    with_bg = make_layer('type: "BiasChannel" bias_channel_param { label_type: PIXEL '
                         'bg_bias: 1 fg_bias: 2 ignore_label: 255 }')
    top, = run_layer(with_bg, make_blobs([x, lab]), make_blobs(1))
    np.testing.assert_array_equal(top[0, :, 0], [[1, 1, 0, 1], [0, 0, 0, 2], [0, 2, 0, 0]])
    no_bg = make_layer('type: "BiasChannel" bias_channel_param { label_type: PIXEL '
                       'fg_bias: 2 ignore_label: 255 }')
    top, = run_layer(no_bg, make_blobs([x, lab]), make_blobs(1))
    np.testing.assert_array_equal(top[0, :, 0], [[2, 0, 0, 0], [0, 0, 0, 2], [0, 2, 0, 0]])


def _adaptive_ref(s, labels, bgp, fgp, margin, num_iter):
    """A transcription of adaptive_bias_channel_layer.cpp for one image with a fixed order."""
    s = s.copy()
    C, H, W = s.shape
    S = H * W
    s = s.reshape(C, S)
    ext = np.full(S, np.inf)
    for c in labels:
        ext = np.minimum(ext, s[c])
    for c in range(C):
        if c not in labels:
            for i in range(S):
                if s[c, i] > ext[i]:
                    s[c, i] = ext[i] - margin
    ext = s[labels[0]].copy()
    for c in labels[1:]:
        ext = np.maximum(ext, s[c])
    m0 = ext.mean()
    for _ in range(num_iter):
        for c in labels:
            nth = int(np.float32(bgp if c == 0 else fgp) * np.float32(S))
            s[c] += np.sort(ext - s[c])[nth]
            ext = np.maximum(ext, s[c])
    return (s + (m0 - ext.mean())).reshape(C, H, W)


def test_adaptive_bias_channel_matches_transcription():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 3, 5))
    lab = np.array([[0, 2, -1], [3, -1, -1]]).reshape(2, 3, 1, 1)
    layer = make_layer('type: "AdaptiveBiasChannel" adaptive_bias_channel_param { num_iter: 2 '
                       'bg_portion: 0.3 fg_portion: 0.5 margin_others: 0.01 }')
    top, = run_layer(layer, make_blobs([x, lab]), make_blobs(1))
    np.testing.assert_allclose(top[0], _adaptive_ref(x[0], [0, 2], 0.3, 0.5, 0.01, 2),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(top[1], _adaptive_ref(x[1], [3], 0.3, 0.5, 0.01, 2),
                               rtol=1e-6, atol=1e-6)


def test_mat_read_batches_files_and_checks_them(tmp_path):
    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(1, 2, 3, 4)
    for i, name in enumerate(["a", "b"]):
        savemat(str(tmp_path / ("%s_blob_0.mat" % name)), {"data": (a + 100 * i).T[..., 0]})
    (tmp_path / "list.txt").write_text("a.png x\nb.png y\n")
    layer = make_layer('type: "MatRead" mat_read_param { prefix: "%s/" source: "%s/list.txt" '
                       'strip: 4 batch_size: 3 }' % (tmp_path, tmp_path), dtype=np.float32)
    top, = run_layer(layer, [], make_blobs(1, dtype=np.float32))
    assert top.shape == (3, 2, 3, 4)
    np.testing.assert_array_equal(top, np.concatenate([a, a + 100, a]))   # the list wraps
    bad = make_layer('type: "MatRead" mat_read_param { prefix: "%s/" source: "%s/list.txt" '
                     'strip: 4 }' % (tmp_path, tmp_path), dtype=np.float64)
    with pytest.raises(CaffeError, match="a float64 net reads double"):
        run_layer(bad, [], make_blobs(1))
    missing = make_layer('type: "MatRead" mat_read_param { prefix: "%s/none_" }' % tmp_path)
    with pytest.raises(CaffeError, match="cannot read MAT file"):
        run_layer(missing, [], make_blobs(1))
