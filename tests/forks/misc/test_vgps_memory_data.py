import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.proto.io import parse_text
from caffepy.proto.upgrade import upgrade_net
from caffepy.testing import make_blobs, make_layer
from caffepy.zoo import replace_data_layers

SHAPES = ('type: "MemoryData" memory_data_param { input_shapes { dim: 2 dim: 3 dim: 1 dim: 1 } '
          'input_shapes { dim: 2 dim: 2 dim: 2 dim: 1 } }')
FOUR = 'type: "MemoryData" memory_data_param { batch_size: 2 channels1: 5 channels2: 3 height2: 2 }'


def test_input_shapes_one_top_per_shape_served_cyclically():
    layer = make_layer(SHAPES)
    top = make_blobs(2)
    layer.setup([], top)
    assert [t.shape for t in top] == [(2, 3, 1, 1), (2, 2, 2, 1)]
    a = np.arange(4 * 3, dtype=float).reshape(4, 3, 1, 1)
    b = -np.arange(4 * 4, dtype=float).reshape(4, 2, 2, 1)
    layer.reset([a, b], 4)
    for rows in ([0, 1], [2, 3], [0, 1]):
        layer.forward([], top)
        np.testing.assert_array_equal(top[0].data, a[rows])
        np.testing.assert_array_equal(top[1].data, b[rows])


def test_channels_k_form_has_one_to_four_tops():
    layer = make_layer(FOUR)
    top = make_blobs(4)
    layer.setup([], top)
    assert [t.shape for t in top] == [(2, 5, 1, 1), (2, 3, 2, 1), (2, 1, 1, 1), (2, 1, 1, 1)]
    top = make_blobs(2)                  # branch pose: the first two shapes, the rest unused
    make_layer(FOUR).setup([], top)
    assert [t.shape for t in top] == [(2, 5, 1, 1), (2, 3, 2, 1)]
    with pytest.raises(CaffeError, match="gives 4 top shapes, the layer has 5"):
        make_layer(FOUR).setup([], make_blobs(5))


def test_fork_form_errors():
    bad = ('type: "MemoryData" memory_data_param { input_shapes { dim: 2 dim: 3 dim: 1 dim: 1 } '
           'input_shapes { dim: 4 dim: 2 dim: 1 dim: 1 } }')
    with pytest.raises(CaffeError, match="inconsistent batch sizes"):
        make_layer(bad).setup([], make_blobs(2))
    layer = make_layer(SHAPES)
    layer.setup([], make_blobs(2))
    with pytest.raises(CaffeError, match="multiple of batch size"):
        layer.reset([np.zeros((3, 3, 1, 1)), np.zeros((3, 2, 2, 1))], 3)


def test_zoo_shapes_of_the_fork_forms():
    v1 = upgrade_net(parse_text(
        'layers { name: "d" type: MEMORY_DATA top: "a" top: "b" top: "c" top: "e" '
        'memory_data_param { batch_size: 1 channels1: 64 channels2: 39 } }',
        caffe_pb2.NetParameter()))
    net = parse_text('layer { name: "m" type: "MemoryData" top: "j" memory_data_param { '
                     'input_shapes { dim: 25 dim: 26 dim: 1 dim: 1 } } }', caffe_pb2.NetParameter())
    got = [[tuple(s.dim) for s in replace_data_layers(n).layer[0].input_param.shape]
           for n in (v1, net)]
    assert got == [[(1, 64, 1, 1), (1, 39, 1, 1), (1, 1, 1, 1), (1, 1, 1, 1)], [(25, 26, 1, 1)]]
    assert [tuple(s.dim) for s in replace_data_layers(net, batch_size=3).layer[0]
            .input_param.shape] == [(3, 26, 1, 1)]
