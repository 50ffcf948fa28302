import math

import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

LT = ('type: "LinearTransform" linear_transform_param { num_output: 3 '
      'weight_filler { type: "gaussian" std: 1 } }')


def test_linear_transform_is_a_bias_free_inner_product():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 2, 3))
    layer = make_layer(LT)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert y.shape == (4, 3)
    np.testing.assert_allclose(y, x.reshape(4, 6) @ layer.blobs[0].data.T)
    check_layer_gradient(make_layer(LT), make_blobs([x]), make_blobs(1))
    layer = make_layer(LT.replace("num_output: 3", "num_output: 3 backprop: false"))
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    bottom[0].diff[...] = 7.0
    top[0].diff[...] = 1.0
    layer.backward(top, [True], bottom)
    assert np.all(bottom[0].diff == 7.0)                 # backprop: false leaves it
    np.testing.assert_allclose(layer.blobs[0].diff, np.ones((3, 4)) @ x.reshape(4, 6))


def _chord(a1, e1, a2, e2):
    """The fork's compute_distance, transcribed."""
    pi = 3.14159265
    def point(a, e):
        return (math.cos(a * pi / 180) * math.sin(e * pi / 180),
                math.sin(e * pi / 180) * math.sin(a * pi / 180), math.cos(e * pi / 180))
    return math.dist(point(a1, e1), point(a2, e2))


def _pose_reference(scores, azi, ele, table, k, mode, version):
    hits = 0
    for s, a, e in zip(scores, azi, ele):
        pairs = [(v, c) for c, v in enumerate(s)]
        if mode == "distance":
            pairs.sort()
        elif mode == "similarity":
            pairs.sort(reverse=True)
        for _, c in pairs[:k]:
            ta, te = int(table[c, 0]), int(table[c, 1])
            if (version == "exact" and (ta, te) == (int(a), int(e))) or (
                    version == "thresh" and _chord(ta, te + 90, int(a), int(e) + 90) <= 0.5236):
                hits += 1
                break
    return hits / len(scores)


def test_pose_accuracy_matches_a_transcription_of_the_forks_loop():
    rng = np.random.default_rng(1)
    n, c = 12, 6
    table = np.stack([rng.integers(0, 360, c), rng.integers(-40, 40, c)], axis=1).astype(float)
    scores = np.round(rng.standard_normal((n, c)), 1)
    lab = rng.integers(0, c, n)
    azi, ele = table[lab, 0] + rng.integers(0, 2, n) * 10, table[lab, 1].copy()
    for mode in ("distance", "similarity", ""):
        for version in ("exact", "thresh"):
            for k in (1, 3):
                text = ('type: "PoseAccuracy" pose_accuracy_param { top_k: %d mode: "%s" '
                        'version: "%s" }' % (k, mode, version))
                (acc,) = run_layer(make_layer(text), make_blobs([scores, azi, ele, table]),
                                   make_blobs(1))
                assert acc == _pose_reference(scores, azi, ele, table, k, mode, version), \
                    (mode, version, k)


def test_similarity_is_features_times_prototypes():
    rng = np.random.default_rng(2)
    x, p = rng.standard_normal((3, 4, 1, 1)), rng.standard_normal((5, 4))
    (y,) = run_layer(make_layer('type: "Similarity"'), make_blobs([x, p]), make_blobs(1))
    np.testing.assert_allclose(y, x.reshape(3, 4) @ p.T)
    check_layer_gradient(make_layer('type: "Similarity"'), make_blobs([x, p]), make_blobs(1))
