import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

TEXT = ('type: "PriorBoxClustered" prior_box_param { width: 10 height: 20 width: 30 height: 12 '
        'variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 step: 16 offset: 0.5 %s }')


def _ref(H, W, img_h, img_w, step, sizes, clip):
    """OpenVINO's reference loop, written out."""
    out = []
    for h in range(H):
        for w in range(W):
            cx, cy = (w + 0.5) * step, (h + 0.5) * step
            for bw, bh in sizes:
                box = [(cx - bw / 2) / img_w, (cy - bh / 2) / img_h,
                       (cx + bw / 2) / img_w, (cy + bh / 2) / img_h]
                out.extend(np.clip(box, 0, 1) if clip else box)
    return np.array(out)


def test_prior_box_clustered_values():
    fmap, img = np.zeros((1, 2, 3, 4)), np.zeros((1, 3, 48, 64))
    for clip in ("clip: false", "clip: true"):
        (y,) = run_layer(make_layer(TEXT % clip), make_blobs([fmap, img]), make_blobs(1))
        assert y.shape == (1, 2, 3 * 4 * 2 * 4)
        np.testing.assert_allclose(y[0, 0], _ref(3, 4, 48, 64, 16, [(10, 20), (30, 12)],
                                                 clip == "clip: true"), rtol=1e-12)
        np.testing.assert_allclose(y[0, 1], np.tile([0.1, 0.1, 0.2, 0.2], 3 * 4 * 2))
    # step from the image and map sizes, one variance for all four coordinates
    text = 'type: "PriorBoxClustered" prior_box_param { width: 8 height: 8 }'
    (y,) = run_layer(make_layer(text), make_blobs([np.zeros((1, 1, 2, 2)), np.zeros((1, 3, 32, 32))]),
                     make_blobs(1))
    np.testing.assert_allclose(y[0, 0, :4], [4 / 32, 4 / 32, 12 / 32, 12 / 32])
    np.testing.assert_allclose(y[0, 1], 0.1)


def test_prior_box_clustered_gradient_is_zero():
    rng = np.random.default_rng(0)
    fmap, img = rng.standard_normal((1, 2, 2, 3)), rng.standard_normal((1, 3, 32, 48))
    check_layer_gradient(make_layer(TEXT % "clip: false"), make_blobs([fmap, img]),
                         make_blobs(1))
