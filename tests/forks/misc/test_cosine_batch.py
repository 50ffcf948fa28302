import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

TEXT = ('type: "CosineSimilarityBatch" cosine_similarity_batch_param { pos_label: 1.7 '
        'neg_label: 0 }')


def test_cosine_similarity_batch_pairs_labels_and_gradient():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 1, 1))
    lab = np.array([1, 0, 1, 2], dtype=float).reshape(4, 1, 1, 1)
    s, pl = run_layer(make_layer(TEXT), make_blobs([x, lab]), make_blobs(2))
    assert s.shape == (6, 1, 1, 1)
    k, flat = 0, x.reshape(4, 3)
    for i in range(4):
        for j in range(i + 1, 4):
            a, b = flat[i], flat[j]
            np.testing.assert_allclose(s.flat[k], a @ b / np.sqrt((a @ a) * (b @ b)))
            assert pl.flat[k] == (1 if lab.flat[i] == lab.flat[j] else 0)   # 1.7 cut to 1
            k += 1
    check_layer_gradient(make_layer(TEXT), make_blobs([x, lab]), make_blobs(2),
                         check_bottom=[0])
