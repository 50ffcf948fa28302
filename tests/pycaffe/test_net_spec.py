"""The behaviours of pycaffe's test_net_spec.py, plus caffepy's eager field checks."""
import pytest

import caffepy as caffe
from caffepy import layers as L, params as P
from caffepy.netspec import NetSpecError, UnknownFieldError
from caffepy.proto import caffe_pb2


def lenet(batch_size, named=True):
    n = caffe.NetSpec() if named else None
    data, label = L.DummyData(shape=[dict(dim=[batch_size, 1, 28, 28]), dict(dim=[batch_size, 1, 1, 1])],
                              transform_param=dict(scale=1. / 255), ntop=2)
    tops = [data, label]
    conv1 = L.Convolution(data, kernel_size=5, num_output=20, weight_filler=dict(type="xavier"))
    pool1 = L.Pooling(conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    conv2 = L.Convolution(pool1, kernel_size=5, num_output=50, weight_filler=dict(type="xavier"))
    pool2 = L.Pooling(conv2, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    ip1 = L.InnerProduct(pool2, num_output=500, weight_filler=dict(type="xavier"))
    relu1 = L.ReLU(ip1, in_place=True)
    ip2 = L.InnerProduct(relu1, num_output=10, weight_filler=dict(type="xavier"))
    loss = L.SoftmaxWithLoss(ip2, label)
    if not named:
        return loss.to_proto()
    for name, top in zip(["data", "label", "conv1", "pool1", "conv2", "pool2", "ip1", "relu1", "ip2",
                          "loss"], tops + [conv1, pool1, conv2, pool2, ip1, relu1, ip2, loss]):
        n[name] = top
    return n.to_proto()


def load(proto):
    return caffe.Net(proto, caffe.TEST)


def test_lenet_named_and_anonymous():
    proto = lenet(50)
    assert proto.layer[6].bottom == proto.layer[6].top == ["ip1"]
    assert [l.name for l in proto.layer] == ["data", "conv1", "pool1", "conv2", "pool2", "ip1", "relu1",
                                             "ip2", "loss"]
    assert proto.layer[0].top == ["data", "label"]
    assert proto.layer[0].transform_param.scale == pytest.approx(1. / 255)
    assert proto.layer[2].pooling_param.pool == caffe_pb2.PoolingParameter.MAX
    assert len(load(proto).layers) == 9
    anon = lenet(50, named=False)
    assert anon.layer[6].bottom == anon.layer[6].top
    assert anon.layer[1].name == "Convolution1" and anon.layer[3].name == "Convolution2"
    assert len(load(anon).layers) == 9


def test_text_round_trip_builds():
    text = str(lenet(8))
    net = caffe.Net(text, caffe.TEST)
    assert net.blobs["ip2"].shape == (8, 10)


def test_zero_tops():
    n = caffe.NetSpec()
    n.data, n.data2 = L.DummyData(shape=dict(dim=3), ntop=2)
    n.silence_data = L.Silence(n.data, ntop=0)
    n.silence_data2 = L.Silence(n.data2, ntop=0)
    proto = n.to_proto()
    assert [l.name for l in proto.layer] == ["data", "silence_data", "silence_data2"]
    assert list(proto.layer[0].dummy_data_param.shape[0].dim) == [3]
    assert len(load(proto).forward()) == 0


def test_input_must_be_a_top():
    data = L.DummyData(ntop=2)
    with pytest.raises(TypeError, match=r"^Silence input 0 is not a Top \(type is <class 'tuple'>\)$"):
        L.Silence(data, ntop=0)
    L.Silence(*data, ntop=0)


def test_unknown_field_raises_at_once_naming_layer_and_field():
    x = L.Input(shape=dict(dim=[1, 1, 4, 4]))
    with pytest.raises(UnknownFieldError, match=r"L.Convolution: unknown field 'kernel_sz'"):
        L.Convolution(x, kernel_sz=3)
    with pytest.raises(AttributeError):
        L.Convolution(x, kernel_sz=3)
    with pytest.raises(UnknownFieldError, match=r"convolution_param.weight_filler.typ"):
        L.Convolution(x, num_output=1, weight_filler=dict(typ="xavier"))
    with pytest.raises(UnknownFieldError, match=r"layer.param\[1\].lr_mul"):
        L.Convolution(x, num_output=1, param=[dict(lr_mult=1), dict(lr_mul=2)])


@pytest.mark.parametrize("kwargs,msg", [
    (dict(kernel_size="3"), r"convolution_param.kernel_size takes int, got '3'"),
    (dict(bias_term=2.5), r"convolution_param.bias_term takes a bool"),
    (dict(weight_filler=3), r"convolution_param.weight_filler is a message FillerParameter"),
    (dict(engine="FAST"), r"convolution_param.engine takes enum Engine"),
    (dict(num_output=[1, 2]), r"convolution_param.num_output takes a single int"),
])
def test_wrong_types_raise_one_line(kwargs, msg):
    x = L.Input(shape=dict(dim=[1, 1, 4, 4]))
    with pytest.raises(NetSpecError, match=msg) as e:
        L.Convolution(x, **kwargs)
    assert "\n" not in str(e.value) and str(e.value).startswith("L.Convolution:")


def test_routing_aliases_fork_params_and_layer_fields():
    x = L.Input(shape=dict(dim=[1, 3, 8, 8]))
    deconv = L.Deconvolution(x, num_output=3, kernel_size=4, stride=2, group=3, bias_term=False)
    assert deconv.fn._fields.convolution_param.group == 3
    swl = L.SoftmaxWithLoss(x, x, axis=1, loss_weight=2, loss_param=dict(ignore_label=255))
    assert swl.fn._fields.softmax_param.axis == 1 and list(swl.fn._fields.loss_weight) == [2]
    assert swl.fn._fields.loss_param.ignore_label == 255
    assert L.ReLU6(x).fn.type_name == "ReLU6"
    assert L.ReLU(x, negative_slope=0.1).fn._fields.relu_param.negative_slope == pytest.approx(0.1)
    assert L.Normalize(x, across_spatial=False).fn._fields.norm_param.across_spatial is False
    assert L.SigmoidCrossEntropyLoss(x, x, normalize=False).fn._fields.loss_param.normalize is False
    assert L.LSTM(x, x, num_output=4).fn._fields.recurrent_param.num_output == 4
    inc = L.Accuracy(x, x, top_k=5, include=dict(phase=caffe.TEST))
    assert inc.fn._fields.include[0].phase == caffe.TEST and inc.fn._fields.accuracy_param.top_k == 5
    py = L.Python(x, module="m", layer="C", param_str="{'a': 1}")
    assert py.fn._fields.python_param.layer == "C"


def test_enums_numpy_and_message_values():
    import numpy as np
    x = L.Input(shape=dict(dim=np.array([1, 3, 8, 8])))
    assert list(x.fn._fields.input_param.shape[0].dim) == [1, 3, 8, 8]
    p = L.Pooling(x, pool="AVE", kernel_size=np.int64(2))
    assert p.fn._fields.pooling_param.pool == P.Pooling.AVE
    filler = caffe_pb2.FillerParameter(type="msra")
    c = L.Convolution(x, num_output=2, kernel_size=(3, 3), weight_filler=filler)
    assert c.fn._fields.convolution_param.weight_filler.type == "msra"
    assert list(c.fn._fields.convolution_param.kernel_size) == [3, 3]
    assert P.Eltwise.SUM == caffe_pb2.EltwiseParameter.SUM
    with pytest.raises(AttributeError, match="P.Pooling has no value 'MAXX'"):
        P.Pooling.MAXX


def test_netspec_item_access_update_and_name_override():
    n = caffe.NetSpec()
    n["data"] = L.Input(shape=dict(dim=[1, 1, 4, 4]))
    n.conv = L.Convolution(n["data"], num_output=2, kernel_size=3)
    n.update("conv", dict(num_output=5))
    n.relu = L.ReLU(n.conv, in_place=True, name="relu_custom")
    proto = n.to_proto()
    assert proto.layer[1].convolution_param.num_output == 5
    assert proto.layer[2].name == "relu_custom" and list(proto.layer[2].top) == ["conv"]
    assert n.keys() == ["data", "conv", "relu"] and len(n.vals()) == 3 and "conv" in n
    with pytest.raises(AttributeError):
        n.missing
    with pytest.raises(NetSpecError, match="convolution_param.num_output"):
        n.update("conv", dict(num_output="many"))


def test_caffepy_layers_is_still_the_layer_package():
    import caffepy.layers.base as base
    from caffepy.layers.conv import ConvolutionLayer  # noqa: F401
    assert caffe.layers.base is base
    assert caffe.layers.layer_type_list() == caffe.layer_type_list()
    assert caffe.to_proto is caffe.netspec.to_proto


def test_fork_lstm_param_does_not_capture_bvlc_lstm():
    """CTPN's ``Lstm`` has ``lstm_param``; BVLC's ``LSTM`` keeps ``recurrent_param``."""
    x = L.Input(shape=dict(dim=[2, 1, 3]))
    assert L.LSTM(x, x, num_output=4).fn._fields.recurrent_param.num_output == 4
    assert L.Lstm(x, num_output=5).fn._fields.lstm_param.num_output == 5
