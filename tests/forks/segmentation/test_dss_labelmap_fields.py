import pytest

from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.proto.io import parse_text
from caffepy.testing import make_blobs, make_layer
from caffepy.zoo import replace_data_layers


def test_imagelabelmapdata_normalize_parses_and_keeps_its_shapes():
    net = parse_text(
        'layer { name: "d" type: "ImageLabelmapData" top: "data" top: "label" '
        'image_data_param { source: "absent.lst" batch_size: 2 new_height: 40 new_width: 30 '
        'normalize: true label_channel: 1 } }', caffe_pb2.NetParameter(), strict=True)
    assert net.layer[0].image_data_param.normalize
    shapes = [tuple(s.dim) for s in replace_data_layers(net).layer[0].input_param.shape]
    assert shapes == [(2, 3, 40, 30), (2, 1, 40, 30)]


def test_imagedata_refuses_the_labelmap_fields():
    layer = make_layer('type: "ImageData" image_data_param { source: "x" normalize: true }')
    with pytest.raises(CaffeError, match="ImageLabelmapData"):
        layer.setup([], make_blobs(2))
