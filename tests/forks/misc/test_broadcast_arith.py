import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer, run_layer


def _bcast_ref(a, b, op):
    """A transcription of synopsys-caffe's offset loops (same number of axes)."""
    shape = tuple(max(x, y) for x, y in zip(a.shape, b.shape))
    out = np.zeros(shape)
    for idx in np.ndindex(shape):
        ia = tuple(0 if s == 1 else i for i, s in zip(idx, a.shape))
        ib = tuple(0 if s == 1 else i for i, s in zip(idx, b.shape))
        out[idx] = op(a[ia], b[ib])
    return out


@pytest.mark.parametrize("kind,op", [("Add", np.add), ("Sub", np.subtract)])
def test_add_and_sub_broadcast_like_the_fork(kind, op):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 1, 4)), rng.standard_normal((1, 3, 4))
    y, = run_layer(make_layer('type: "%s"' % kind), make_blobs([a, b]), make_blobs(1))
    np.testing.assert_allclose(y, _bcast_ref(a, b, op))
    c = rng.standard_normal((3, 4))
    y, = run_layer(make_layer('type: "%s"' % kind), make_blobs([a, c]), make_blobs(1))
    np.testing.assert_allclose(y, op(a, c))
    s = np.array(1.5)
    y, = run_layer(make_layer('type: "%s"' % kind), make_blobs([s, c]), make_blobs(1))
    np.testing.assert_allclose(y, op(1.5, c))
    with pytest.raises(CaffeError, match="broadcast"):
        run_layer(make_layer('type: "%s"' % kind), make_blobs([a, np.zeros((5,))]),
                  make_blobs(1))


def test_sub_with_one_bottom_subtracts_its_blob():
    lp = caffe_pb2.LayerParameter(name="s", type="Sub")
    blob = lp.blobs.add()
    blob.shape.dim.extend([3])
    blob.data.extend([1.0, 2.0, 3.0])
    from caffepy.layers.base import create_layer
    layer = create_layer(lp, dtype=np.float64)
    x = np.arange(6.0).reshape(2, 3)
    y, = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, x - [1, 2, 3])
    with pytest.raises(CaffeError, match="parameter blob"):
        run_layer(make_layer('type: "Sub"'), make_blobs([x]), make_blobs(1))
