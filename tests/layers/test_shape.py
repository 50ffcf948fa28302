import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4, 5))


def run(text, arrays, n_top=1, dtype=np.float64):
    layer = make_layer(text, dtype=dtype)
    bottom, top = make_blobs(arrays, dtype), make_blobs(n_top, dtype)
    return layer, bottom, top, run_layer(layer, bottom, top)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("param,axis", [("", 1), ("concat_param { axis: 2 }", 2),
                                        ("concat_param { axis: -1 }", 3),
                                        ("concat_param { concat_dim: 0 }", 0)])
def test_concat(param, axis, dtype):
    other = list(X.shape)
    other[axis] = 2
    arrays = [X, RNG.standard_normal(other)]
    layer, bottom, top, (y,) = run('type: "Concat" ' + param, arrays, dtype=dtype)
    np.testing.assert_array_equal(y, np.concatenate(arrays, axis).astype(dtype))
    if dtype == np.float64:
        check_layer_gradient(layer, bottom, top)


def test_concat_shape_mismatch():
    with pytest.raises(CaffeError, match=r"bottom\[1\] shape \(2, 3, 5, 5\)"):
        run('type: "Concat"', [X, np.zeros((2, 3, 5, 5))])


@pytest.mark.parametrize("param,bounds", [("slice_point: 1 slice_point: 3", [0, 1, 3, 4]),
                                          ("", [0, 2, 4])])
def test_slice(param, bounds):
    n = len(bounds) - 1
    text = 'type: "Slice" slice_param { axis: 2 %s }' % param
    layer, bottom, top, ys = run(text, [X], n_top=n)
    for y, a, b in zip(ys, bounds, bounds[1:]):
        np.testing.assert_array_equal(y, X[:, :, a:b])
    check_layer_gradient(layer, bottom, top)


def test_slice_legacy_dim_and_errors():
    _, _, _, ys = run('type: "Slice" slice_param { slice_dim: 1 }', [X], n_top=3)
    assert [y.shape[1] for y in ys] == [1, 1, 1]
    with pytest.raises(CaffeError, match="split equally"):
        run('type: "Slice" slice_param { axis: 3 }', [X], n_top=2)
    with pytest.raises(CaffeError, match="slice_point"):
        run('type: "Slice" slice_param { axis: 3 slice_point: 2 }', [X], n_top=3)


def test_split_shares_data_and_sums_diffs():
    layer, bottom, top, ys = run('type: "Split"', [X], n_top=3)
    for t in top:
        assert np.shares_memory(t.data, bottom[0].data)
    check_layer_gradient(layer, bottom, top)


@pytest.mark.parametrize("param,shape", [("", (2, 60)), ("flatten_param { axis: 2 }", (2, 3, 20)),
                                         ("flatten_param { axis: 1 end_axis: 2 }", (2, 12, 5)),
                                         ("flatten_param { axis: 0 end_axis: -2 }", (24, 5))])
def test_flatten(param, shape):
    layer, bottom, top, (y,) = run('type: "Flatten" ' + param, [X])
    assert y.shape == shape
    np.testing.assert_array_equal(y, X.reshape(shape))
    assert np.shares_memory(top[0].data, bottom[0].data)
    check_layer_gradient(layer, bottom, top)


@pytest.mark.parametrize("param,shape", [
    ("shape { dim: 0 dim: -1 dim: 4 }", (2, 15, 4)),
    ("shape { dim: 6 dim: 20 }", (6, 20)),
    ("shape { dim: -1 } axis: 1", (2, 60)),
    ("shape { dim: 2 dim: 2 } axis: 2 num_axes: 1", (2, 3, 2, 2, 5)),
    ("shape { dim: 1 } axis: -1 num_axes: 0", (2, 3, 4, 5, 1)),
    ("shape { dim: 1 } axis: 0 num_axes: 0", (1, 2, 3, 4, 5)),
    ("shape { dim: 0 dim: 0 dim: 0 dim: 0 }", (2, 3, 4, 5)),
])
def test_reshape(param, shape):
    layer, bottom, top, (y,) = run('type: "Reshape" reshape_param { %s }' % param, [X])
    assert y.shape == shape
    np.testing.assert_array_equal(y, X.reshape(shape))
    assert np.shares_memory(top[0].data, bottom[0].data)
    check_layer_gradient(layer, bottom, top)


def test_reshape_follows_a_new_bottom_shape():
    layer, bottom, top, _ = run('type: "Reshape" reshape_param { shape { dim: 0 dim: -1 } }', [X])
    bottom[0].reshape(4, 3, 2)
    bottom[0].data[...] = 1
    layer.forward(bottom, top)
    assert top[0].shape == (4, 6) and (top[0].data == 1).all()


@pytest.mark.parametrize("param,match", [("shape { dim: -1 dim: -1 }", "at most one"),
                                         ("shape { dim: 7 dim: -1 }", "infer"),
                                         ("shape { dim: 7 dim: 3 }", "count"),
                                         ("shape { dim: 1 } axis: 2 num_axes: 3", "exceed")])
def test_reshape_errors(param, match):
    with pytest.raises(CaffeError, match=match):
        run('type: "Reshape" reshape_param { %s }' % param, [X])


@pytest.mark.parametrize("param,index", [
    ("crop_param { axis: 2 offset: 1 offset: 2 }", np.s_[:, :, 1:3, 2:5]),
    ("crop_param { axis: 1 offset: 1 }", np.s_[:, 1:3, 1:3, 1:4]),
    ("", np.s_[:, :, 0:2, 0:3]),
])
def test_crop(param, index):
    ref = np.zeros(X[index].shape)
    layer, bottom, top, (y,) = run('type: "Crop" ' + param, [X, ref])
    np.testing.assert_array_equal(y, X[index])
    check_layer_gradient(layer, bottom, top, check_bottom=[0])


def test_crop_too_large():
    with pytest.raises(CaffeError, match="exceeds"):
        run('type: "Crop" crop_param { offset: 3 }', [X, np.zeros((2, 3, 2, 2))])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [0, 1, 3])
def test_tile(axis, dtype):
    layer, bottom, top, (y,) = run('type: "Tile" tile_param { axis: %d tiles: 3 }' % axis, [X],
                                   dtype=dtype)
    outer = int(np.prod(X.shape[:axis]))
    want = np.tile(X.reshape(outer, -1), (1, 3)).reshape(y.shape)
    np.testing.assert_array_equal(y, want.astype(dtype))
    if dtype == np.float64:
        check_layer_gradient(layer, bottom, top)


def test_split_of_a_net_built_for_its_shapes_allocates_nothing_until_forward():
    """A Split in a net built for its shapes only keeps the shape of a blob too large to hold
    (caffepy summary of a fully convolutional net with 88172 classes); run, it shares the data."""
    import numpy as np
    import caffepy
    from caffepy.layers.base import shapes_only
    from caffepy.proto import caffe_pb2, io as proto_io
    text = """layer { name: "x" type: "Input" top: "x" input_param { shape { dim: %d dim: 3 } } }
layer { name: "a" type: "Power" bottom: "x" top: "a" }
layer { name: "b" type: "AbsVal" bottom: "x" top: "b" }
"""
    with shapes_only():
        net = caffepy.Net(proto_io.parse_text(text % 10 ** 11, caffe_pb2.NetParameter()),
                          caffepy.TEST)
    assert net.blobs["a"].shape == (10 ** 11, 3)
    with shapes_only():
        net = caffepy.Net(proto_io.parse_text(text % 2, caffe_pb2.NetParameter()), caffepy.TEST)
    net.blobs["x"].data[...] = -np.arange(6.0).reshape(2, 3)
    net.forward()
    np.testing.assert_array_equal(net.blobs["b"].data, np.arange(6.0).reshape(2, 3))
