"""DeViSE's MultiAccuracy against a transcription of multi_accuracy_layer.cpp's loops."""
import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import make_blobs, make_layer, run_layer


def _ref(x, labels, mlabel, top_k, version):
    """The fork's Forward_cpu, inner loop counter reuse included; x is outer x C x inner."""
    outer, c, inner = x.shape
    acc = count = 0
    lines = []
    for i in range(outer):
        j = 0
        while j < inner:
            label = int(labels[i * inner + j])
            vec = [(x[i, k, j], k) for k in range(c)]
            vec.sort(reverse=(version == "similarity"))
            ks = [0]
            if top_k > 1:
                ks, pre, p = [], -1, 0
                while len(ks) < top_k:
                    v = int(mlabel[vec[p][1] * 3])
                    if v != pre:
                        ks.append(p)
                        pre = v
                    p += 1
            checker = False
            for k in range(top_k):
                j = ks[k]
                if label == int(mlabel[vec[j][1] * 3]):
                    acc += 1
                    checker = True
                    break
            lines.append("%d %g %d %d" % (label, vec[0][0], vec[0][1], int(checker)))
            count += 1
            j += 1
    return acc / count, lines


@pytest.mark.parametrize("shape,top_k,version", [((6, 5), 1, "distance"),
                                                 ((6, 5), 2, "similarity"),
                                                 ((6, 5), 3, "distance")])
def test_multi_accuracy_matches_the_fork(tmp_path, shape, top_k, version):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
    x[0, 1] = x[0, 2]                                   # a tie, ordered by class index
    outer, inner = shape[0], (shape[2] if len(shape) == 3 else 1)
    labels = rng.integers(0, 3, outer * inner).astype(float)
    mlabel = np.array([[0, 9, 9], [1, 9, 9], [1, 9, 9], [2, 9, 9], [0, 9, 9]], dtype=float)
    out = tmp_path / "res.txt"
    out.write_text("earlier\n")
    text = ('type: "MultiAccuracy" multi_accuracy_param { top_k: %d version: "%s" '
            'filename: "%s" }' % (top_k, version, out))
    (acc,) = run_layer(make_layer(text), make_blobs([x, labels, mlabel]), make_blobs(1))
    want, lines = _ref(x.reshape(outer, 5, inner), labels, mlabel.ravel(), top_k, version)
    assert acc == pytest.approx(want)
    assert out.read_text() == "earlier\n" + "".join(line + "\n" for line in lines)


def test_multi_accuracy_refusals():
    blobs = [np.zeros((2, 3)), np.zeros(2), np.zeros((3, 3))]
    with pytest.raises(CaffeError, match="version"):
        run_layer(make_layer('type: "MultiAccuracy"'), make_blobs(blobs), make_blobs(1))
    text = 'type: "MultiAccuracy" multi_accuracy_param { version: "distance" }'
    with pytest.raises(CaffeError, match="does not end"):
        run_layer(make_layer(text), make_blobs([np.zeros((2, 3, 2)), np.zeros(4),
                                                np.zeros((3, 3))]), make_blobs(1))
