"""caffepy.zoo's sweep helpers: constant fillers, cheap random weights, the releasing forward."""
import numpy as np

import caffepy
from caffepy import zoo
from caffepy.net import Net
from caffepy.proto import caffe_pb2
from google.protobuf import text_format

NET = '''
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: "noise" type: "DummyData" top: "n"
        dummy_data_param { shape { dim: 2 dim: 4 dim: 6 dim: 6 }
                           data_filler { type: "gaussian" std: 1 } } }
layer { name: "conv" type: "Convolution" bottom: "x" top: "c"
        convolution_param { num_output: 4 kernel_size: 3
                            weight_filler { type: "gaussian" std: 0.01 }
                            bias_filler { type: "constant" value: 0.5 } } }
layer { name: "bn" type: "BatchNorm" bottom: "c" top: "c" }
layer { name: "relu" type: "ReLU" bottom: "c" top: "r" }
layer { name: "sum" type: "Eltwise" bottom: "r" bottom: "n" top: "s" }
layer { name: "ip" type: "InnerProduct" bottom: "s" top: "y"
        inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
'''


def _param():
    p = caffe_pb2.NetParameter()
    text_format.Parse(NET, p)
    return p


def test_constant_fillers():
    p = zoo.constant_fillers(_param())
    conv = p.layer[2].convolution_param
    assert (conv.weight_filler.type, conv.weight_filler.value) == ("constant", 0)
    assert (conv.bias_filler.type, conv.bias_filler.value) == ("constant", 0.5)
    assert p.layer[6].inner_product_param.weight_filler.type == "constant"
    assert p.layer[1].dummy_data_param.data_filler[0].type == "gaussian"
    assert _param().layer[2].convolution_param.weight_filler.type == "gaussian"   # a copy


def test_randomize_params():
    net = Net(zoo.constant_fillers(_param()), caffepy.TEST)
    zoo.randomize_params(net, seed=3)
    w = net.params["conv"][0].data
    assert abs(w.std() - np.sqrt(2.0 / 27)) < 0.1 * np.sqrt(2.0 / 27) and abs(w.mean()) < 0.1
    np.testing.assert_array_equal(net.params["conv"][1].data, 0.5)
    bn = [b.data for b in net.params["bn"]]
    assert np.all(bn[0] == 0) and np.all(bn[1] == 1) and np.all(bn[2] == 1)
    assert net.params["ip"][0].data.std() > 0
    again = Net(zoo.constant_fillers(_param()), caffepy.TEST)
    zoo.randomize_params(again, seed=3)
    np.testing.assert_array_equal(again.params["ip"][0].data, net.params["ip"][0].data)


def test_forward_releasing_matches_forward_and_frees():
    caffepy.set_random_seed(0)
    net = Net(zoo.constant_fillers(_param()), caffepy.TEST)
    zoo.randomize_params(net)
    net.blobs["x"].data[...] = np.random.default_rng(0).standard_normal((2, 3, 8, 8))
    x = net.blobs["x"].data.copy()
    caffepy.set_random_seed(1)
    expected = net.forward()["y"].copy()
    net.blobs["x"].data[...] = x
    caffepy.set_random_seed(1)
    zoo.forward_releasing(net)
    np.testing.assert_allclose(net.blobs["y"].data, expected, rtol=1e-6)
    assert net.blobs["c"].data.shape == (0,) and net.blobs["s"].data.shape == (0,)
    assert net.blobs["y"].data.shape == (2, 5)


def test_detectnet_label_input_shape_and_values():
    from caffepy import zoo as _zoo
    from caffepy.proto import io as _io
    text = '''layer { name: "d" type: "Data" top: "data" data_param { source: "x" batch_size: 4 } }
    layer { name: "l" type: "Data" top: "label" data_param { source: "y" batch_size: 4 } }
    layer { name: "t" type: "DetectNetTransformation" bottom: "data" bottom: "label"
      top: "td" top: "tl" }'''
    param = _zoo.replace_data_layers(_io.read_net(text), batch_size=1)
    assert list(param.layer[1].input_param.shape[0].dim) == [1, 1, 2, 16]
    v = _zoo.input_values("label", (1, 1, 2, 16), image_hw=(100, 200))
    assert v[0, 0, 0, :2].tolist() == [1, 16] and v[0, 0, 1, [0, 1, 2, 3, 5]].tolist() == [
        20, 10, 100, 60, 1]


def test_unregistered_fork_reader_is_a_data_layer():
    """A fork's reader caffepy does not build (no bottoms, *Data / a data param) is replaced;
    an unregistered computing type, or one with bottoms, is not."""
    from caffepy.proto import caffe_pb2
    from google.protobuf import text_format
    net = text_format.Parse(
        'layer { name: "d" type: "OPData" top: "data" top: "label" transform_param { crop_size: 32 } }'
        'layer { name: "m" type: "MultiLabelImageFancy" top: "x" data_param { batch_size: 4 } }'
        'layer { name: "u" type: "FancyOp" bottom: "data" top: "y" }'
        'layer { name: "v" type: "FancyData" bottom: "data" top: "z" }', caffe_pb2.NetParameter())
    assert [zoo.is_data_layer(lp) for lp in net.layer] == [True, True, False, False]
    out = zoo.replace_data_layers(net)
    assert [lp.type for lp in out.layer][:2] == ["Input", "Input"]
    assert list(out.layer[0].input_param.shape[0].dim)[1:] == [3, 32, 32]


def test_image_readers_first_top_is_an_image_whatever_its_name():
    """ImageData / LabelData read images into their first top: one named "label" is a label
    map (N x 1 x H x W with is_color: false), not a label vector."""
    net = text_format.Parse(
        'layer { name: "l" type: "ImageData" top: "label" top: "tmp" image_data_param { '
        'batch_size: 2 new_height: 20 new_width: 24 is_color: false } }'
        'layer { name: "h" type: "HDF5Data" top: "label" top: "data" '
        'hdf5_data_param { batch_size: 2 } }', caffe_pb2.NetParameter())
    out = zoo.replace_data_layers(net)
    assert list(out.layer[0].input_param.shape[0].dim) == [2, 1, 20, 24]
    assert list(out.layer[0].input_param.shape[1].dim) == [2]
    assert list(out.layer[1].input_param.shape[0].dim) == [2]


CALIBRATED = '''
input: "x" input_shape { dim: 4 dim: 3 dim: 5 dim: 5 }
layer { name: "bn" type: "BatchNorm" bottom: "x" top: "b" }
layer { name: "pbn" type: "BN" bottom: "x" top: "p"
        bn_param { slope_filler { type: "constant" value: 1 } } }
'''


def test_forward_releasing_calibrates_batch_norm_statistics():
    net = Net(text_format.Parse(CALIBRATED, caffe_pb2.NetParameter()), caffepy.TEST)
    x = 7 + 3 * np.random.default_rng(0).standard_normal((4, 3, 5, 5))
    net.blobs["x"].data[...] = x
    zoo.forward_releasing(net, calibrate=True)
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    for name in ("b", "p"):             # each normalises with the statistics of its own input
        y = net.blobs[name].data
        np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), 0, atol=1e-4)
        np.testing.assert_allclose(y.var(axis=(0, 2, 3)), var / (var + 1e-5), rtol=1e-4)
    np.testing.assert_allclose(net.params["bn"][0].data, mean, rtol=1e-5)
    np.testing.assert_allclose(net.params["pbn"][3].data.reshape(-1), var, rtol=1e-5)


READERS = '''
input: "ids" input_shape { dim: 2 dim: 6 }
input: "data" input_shape { dim: 1 dim: 2 dim: 8 dim: 8 }
input: "rois" input_shape { dim: 3 dim: 5 dim: 1 dim: 1 }
input: "boxes" input_shape { dim: 2 dim: 5 }
layer { name: "embed" type: "Embed" bottom: "ids" top: "e"
        embed_param { num_output: 4 input_dim: 9 } }
layer { name: "embed2" type: "Embed" bottom: "ids" top: "e2"
        embed_param { num_output: 4 input_dim: 9 } }
layer { name: "pool" type: "ROIPooling" bottom: "data" bottom: "rois" top: "r"
        roi_pooling_param { pooled_h: 2 pooled_w: 2 spatial_scale: 0.03125 } }
layer { name: "pool2" type: "ROIPooling" bottom: "data" bottom: "boxes" top: "r2"
        roi_pooling_param { pooled_h: 2 pooled_w: 2 spatial_scale: 0.03125 } }
'''


def test_net_input_values_follow_their_readers():
    net = Net(text_format.Parse(READERS, caffe_pb2.NetParameter()), caffepy.TEST)
    values = zoo.net_input_values(net, np.random.default_rng(0))
    ids = values["ids"]                  # read by two Embeds through a Split
    assert ids.shape == (2, 6) and np.all(ids == np.round(ids)) and 0 <= ids.min() <= ids.max() < 9
    for name, shape in (("rois", (3, 5, 1, 1)), ("boxes", (2, 5))):
        rows = values[name].reshape(-1, 5)
        assert values[name].shape == shape and np.all(rows[:, 0] == 0)
        assert np.all(rows[:, 3] > rows[:, 1]) and np.all(rows[:, 4] > rows[:, 2])
    for name, v in values.items():
        net.blobs[name].data[...] = v
    zoo.forward_releasing(net)
    assert np.isfinite(net.blobs["r2"].data).all() and net.blobs["e"].data.shape == (2, 6, 4)


def test_calibration_of_one_value_per_channel_stays_finite():
    text = '''
        input: "x" input_shape { dim: %d dim: 3 }
        layer { name: "bn" type: "BatchNorm" bottom: "x" top: "y" batch_norm_param { eps: 0 } }
        '''
    net = Net(text_format.Parse(text % 1, caffe_pb2.NetParameter()), caffepy.TEST)
    x = np.array([[1, 2, 6]], dtype=np.float32)
    net.blobs["x"].data[...] = x
    zoo.forward_releasing(net, calibrate=True)
    y = net.blobs["y"].data                # one sample per channel: the whole input's statistics
    np.testing.assert_allclose(y, (x - x.mean()) / x.std(), rtol=1e-5)
    net = Net(text_format.Parse(text % 2, caffe_pb2.NetParameter()), caffepy.TEST)
    x = np.array([[4, 0, 1], [4, 2, 3]], dtype=np.float32)   # channel 0 has no spread
    net.blobs["x"].data[...] = x
    zoo.forward_releasing(net, calibrate=True)
    y = net.blobs["y"].data
    assert np.isfinite(y).all() and np.allclose(y[:, 0], 0)
    np.testing.assert_allclose(y[:, 1], [-1, 1], rtol=1e-5)


LENIENT_TEXT = '''
name: "first"
name: "second"
// a comment in C++ style
input: "x" input_shape { dim: 1 dim: 3 }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
        inner_product_param { num_output: 2 } }
'''


def test_read_for_run_reads_as_summary_does():
    import pytest
    from caffepy.errors import ProtoError
    from caffepy.proto import io as proto_io
    with pytest.raises(ProtoError):
        proto_io.read_net(LENIENT_TEXT)                       # Caffe's parser refuses it
    with pytest.raises(ProtoError):
        Net(LENIENT_TEXT, caffepy.TEST)                       # and so do Net / caffe.Net
    param = zoo.read_for_run(LENIENT_TEXT)
    assert param.name == "second"
    net = Net(zoo.constant_fillers(param), caffepy.TEST)
    zoo.randomize_params(net, 0)
    net.blobs["x"].data[...] = 1
    zoo.forward_releasing(net)
    assert net.blobs["y"].data.shape == (1, 2)
    with pytest.raises(ProtoError, match="no field named"):   # unknown fields stay errors
        zoo.read_for_run(LENIENT_TEXT.replace("num_output: 2", "num_output: 2 size: 3"))


def test_a_blob_read_only_as_labels_gets_labels_whatever_its_name():
    text = '''
        input: "data" input_shape { dim: 2 dim: 3 dim: 4 dim: 4 }
        input: "gt" input_shape { dim: 2 dim: 1 dim: 4 dim: 4 }
        input: "target" input_shape { dim: 2 dim: 3 dim: 4 dim: 4 }
        layer { name: "loss" type: "SoftmaxWithLoss" bottom: "data" bottom: "gt" top: "loss" }
        layer { name: "acc" type: "Accuracy" bottom: "data" bottom: "gt" top: "acc" }
        layer { name: "l2" type: "EuclideanLoss" bottom: "data" bottom: "target" top: "l2" }
        '''
    net = Net(text_format.Parse(text, caffe_pb2.NetParameter()), caffepy.TEST)
    values = zoo.net_input_values(net, np.random.default_rng(0))
    assert np.all(values["gt"] == 0)            # class 0 at every pixel: a valid label
    assert values["target"].std() > 0.5         # a regression target stays gaussian
    for name, v in values.items():
        net.blobs[name].data[...] = v
    net.forward()
    assert np.isfinite(net.blobs["loss"].data).all()
    from caffepy.zoo import run
    assert run._reads_labels("SoftmaxWithLossOHEM", 1) and run._reads_labels("MyForkAccuracy", 1)
    assert not run._reads_labels("SoftmaxWithLoss", 0) and not run._reads_labels("EuclideanLoss", 1)
