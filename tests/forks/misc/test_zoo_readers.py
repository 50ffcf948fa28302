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


DOC = ('layer { name: "d" type: "DocData" top: "data" %s image_transform_param { %s } '
       'doc_data_param { sources: "db" batch_size: 10 backend: LMDB %s } }')


def test_docdata_shape_preserving_transforms_and_labels():
    params = ('params { linear_params { shift: 127 scale: 0.0039 } } '
              'params { color_jitter_params { sigma: 0.04 } } rng_seed: 1')
    assert _shapes(DOC % ('', params, '')) == [(10, 3, 224, 224)]
    two = DOC % ('top: "a" top: "b"', params, 'label_names: "a" label_names: "b"')
    assert _shapes(two) == [(10, 3, 224, 224), (10,), (10,)]


def test_docdata_fixed_resize_and_crop():
    # the fork's resize reports width before height; its crop height before width
    resize = 'params { resize_params { width: 300 height: 200 } }'
    assert _shapes(DOC % ('', resize, ''))[0] == (10, 3, 300, 200)
    crop = resize + ' params { crop_params { width: 64 height: 48 } }'
    assert _shapes(DOC % ('', crop, ''))[0] == (10, 3, 48, 64)
    tied = 'params { crop_params { size: 128 } }'
    assert _shapes(DOC % ('', tied, ''))[0] == (10, 3, 128, 128)
    # a draw among sizes, or a crop that may not be drawn: the size stays the default
    drawn = 'params { crop_params { size: 100 size: 120 } }'
    assert _shapes(DOC % ('', drawn, ''))[0] == (10, 3, 224, 224)
    maybe = 'params { crop_params { size: 100 } linear_params { scale: 2 } }'
    assert _shapes(DOC % ('', maybe, ''))[0] == (10, 3, 224, 224)
