import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_softmax_with_weighted_loss_weighs_each_class(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 2, 2))
    lab = rng.integers(0, 3, (2, 1, 2, 2)).astype(float)
    lab[0, 0, 0, 0] = 255
    weights = tmp_path / "w.txt"
    weights.write_text("0.5 2.0\n1.5\n")
    text = ('type: "SoftmaxWithWeightedLoss" loss_param { weight_source: "%s" '
            'ignore_label: 255 normalization: VALID }' % weights)
    loss, = run_layer(make_layer(text), make_blobs([x, lab]), make_blobs(1))
    # a transcription of the fork's CPU loops
    w = [0.5, 2.0, 1.5]
    p = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    total, batch_weight = 0.0, 0.0
    for n in range(2):
        for h in range(2):
            for v in range(2):
                l = int(lab[n, 0, h, v])
                if l == 255:
                    continue
                total -= w[l] * np.log(max(p[n, l, h, v], np.finfo(np.float32).tiny))
                batch_weight += w[l]
    np.testing.assert_allclose(loss, total / max(1, int(batch_weight)))
    check_layer_gradient(make_layer(text), make_blobs([x, lab]), make_blobs(1),
                         check_bottom=[0])
    weights.write_text("1 2\n")
    with pytest.raises(CaffeError, match="2 class weights"):
        run_layer(make_layer(text), make_blobs([x, lab]), make_blobs(1))
