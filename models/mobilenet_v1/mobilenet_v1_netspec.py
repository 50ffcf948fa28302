"""MobileNet v1 (shicai/MobileNet-Caffe mobilenet_deploy.prototxt) in the DSL.

Run ``python models/mobilenet_v1/mobilenet_v1_netspec.py [out_dir]`` to regenerate
``mobilenet_v1_deploy.prototxt``.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import caffepy  # noqa: E402
from caffepy import layers as L, params as P  # noqa: E402
from netspec_tools import named, script_main  # noqa: E402


# (name, output channels, stride) of each depthwise-separable block
BLOCKS = [("2_1", 64, 1), ("2_2", 128, 2), ("3_1", 128, 1), ("3_2", 256, 2), ("4_1", 256, 1),
          ("4_2", 512, 2), ("5_1", 512, 1), ("5_2", 512, 1), ("5_3", 512, 1), ("5_4", 512, 1),
          ("5_5", 512, 1), ("5_6", 1024, 2), ("6", 1024, 1)]
FROZEN = [dict(lr_mult=0, decay_mult=0)] * 3
SCALE = dict(param=[dict(lr_mult=1, decay_mult=0)] * 2, filler=dict(value=1), bias_term=True,
             bias_filler=dict(value=0))


def conv_bn_relu(n, bottom, name, relu, num_output, kernel_size, stride, pad, **kw):
    n[name] = L.Convolution(bottom, param=[dict(lr_mult=1, decay_mult=1)], num_output=num_output,
                            bias_term=False, pad=pad, kernel_size=kernel_size, stride=stride,
                            weight_filler=dict(type="msra"), **kw)
    n[name + "/bn"] = L.BatchNorm(n[name], in_place=True, param=FROZEN, use_global_stats=True, eps=1e-5)
    n[name + "/scale"] = L.Scale(n[name], in_place=True, **SCALE)
    n[relu] = L.ReLU(n[name], in_place=True)
    return n[name]


def deploy(batch_size=1, num_classes=1000):
    n = caffepy.NetSpec()
    n.data = L.Input(shape=dict(dim=[batch_size, 3, 224, 224]))
    x = conv_bn_relu(n, n.data, "conv1", "relu1", 32, 3, 2, 1)
    channels = 32
    for tag, out, stride in BLOCKS:
        x = conv_bn_relu(n, x, "conv%s/dw" % tag, "relu%s/dw" % tag, channels, 3, stride, 1,
                         group=channels, engine=P.Convolution.CAFFE)
        x = conv_bn_relu(n, x, "conv%s/sep" % tag, "relu%s/sep" % tag, out, 1, 1, 0)
        channels = out
    n.pool6 = L.Pooling(x, pool=P.Pooling.AVE, global_pooling=True)
    n.fc7 = L.Convolution(n.pool6, param=[dict(lr_mult=1, decay_mult=1), dict(lr_mult=2, decay_mult=0)],
                          num_output=num_classes, kernel_size=1, weight_filler=dict(type="msra"),
                          bias_filler=dict(type="constant", value=0))
    n.prob = L.Softmax(n.fc7)
    return named("MOBILENET", n.to_proto())


def outputs():
    return {"mobilenet_v1_deploy.prototxt": deploy()}


if __name__ == "__main__":
    script_main(outputs, __file__)
