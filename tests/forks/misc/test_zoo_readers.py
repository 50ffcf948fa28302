from caffepy.proto import caffe_pb2
from caffepy.proto.io import parse_text
from caffepy.zoo import is_data_layer, replace_data_layers


def _shapes(text, **kw):
    net = parse_text(text, caffe_pb2.NetParameter(), strict=True)
    assert is_data_layer(net.layer[0])
    return [tuple(s.dim) for s in replace_data_layers(net, **kw).layer[0].input_param.shape]


def test_picpac_classification_tops():
    text = ('layer { name: "d" type: "PicPac" top: "data" top: "label" picpac_param { '
            'path: "db" batch: 32 channels: 3 split: 10 split_fold: 0 perturb: true '
            'pert_angle: 10 resize_width: 224 resize_height: 200 } }')
    assert _shapes(text) == [(32, 3, 200, 224), (32,)]
    assert _shapes(text, batch_size=2) == [(2, 3, 200, 224), (2,)]


def test_picpac_crop_onehot_and_annotations():
    base = ('layer { name: "d" type: "PicPac" top: "data" top: "label" picpac_param { '
            'path: "db" batch: 4 channels: 1 resize_width: 64 resize_height: 64 %s } }')
    assert _shapes(base % 'crop_width: 48 crop_height: 40 onehot: 5') == [(4, 1, 40, 48), (4, 5)]
    assert _shapes(base % 'annotate: "json" onehot: 3') == [(4, 1, 64, 64), (4, 3, 64, 64)]
    assert _shapes(base % 'annotate: "json"') == [(4, 1, 64, 64), (4, 1, 64, 64)]
