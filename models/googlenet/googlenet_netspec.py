"""GoogLeNet (BVLC GoogLeNet, models/bvlc_googlenet/deploy.prototxt) in the DSL.

Run ``python models/googlenet/googlenet_netspec.py [out_dir]`` to regenerate ``googlenet_deploy.prototxt``.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import caffepy  # noqa: E402
from caffepy import layers as L, params as P  # noqa: E402
from netspec_tools import named, script_main  # noqa: E402


# name: (1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection)
INCEPTION = [
    ("3a", (64, 96, 128, 16, 32, 32)), ("3b", (128, 128, 192, 32, 96, 64)), "pool3",
    ("4a", (192, 96, 208, 16, 48, 64)), ("4b", (160, 112, 224, 24, 64, 64)),
    ("4c", (128, 128, 256, 24, 64, 64)), ("4d", (112, 144, 288, 32, 64, 64)),
    ("4e", (256, 160, 320, 32, 128, 128)), "pool4",
    ("5a", (256, 160, 320, 32, 128, 128)), ("5b", (384, 192, 384, 48, 128, 128)),
]
LEARN = [dict(lr_mult=1, decay_mult=1), dict(lr_mult=2, decay_mult=0)]


def conv_relu(n, name, relu, bottom, num_output, kernel_size, **kw):
    n[name] = L.Convolution(bottom, param=LEARN, num_output=num_output, kernel_size=kernel_size, **kw)
    n[relu] = L.ReLU(n[name], in_place=True)
    return n[name]


def inception(n, name, bottom, widths):
    p = "inception_%s/" % name
    b1 = conv_relu(n, p + "1x1", p + "relu_1x1", bottom, widths[0], 1)
    r3 = conv_relu(n, p + "3x3_reduce", p + "relu_3x3_reduce", bottom, widths[1], 1)
    b3 = conv_relu(n, p + "3x3", p + "relu_3x3", r3, widths[2], 3, pad=1)
    r5 = conv_relu(n, p + "5x5_reduce", p + "relu_5x5_reduce", bottom, widths[3], 1)
    b5 = conv_relu(n, p + "5x5", p + "relu_5x5", r5, widths[4], 5, pad=2)
    n[p + "pool"] = L.Pooling(bottom, pool=P.Pooling.MAX, kernel_size=3, stride=1, pad=1)
    bp = conv_relu(n, p + "pool_proj", p + "relu_pool_proj", n[p + "pool"], widths[5], 1)
    n[p + "output"] = L.Concat(b1, b3, b5, bp)
    return n[p + "output"]


def deploy(batch_size=10, num_classes=1000):
    n = caffepy.NetSpec()
    n.data = L.Input(shape=dict(dim=[batch_size, 3, 224, 224]))
    lrn = dict(local_size=5, alpha=0.0001, beta=0.75)
    x = conv_relu(n, "conv1/7x7_s2", "conv1/relu_7x7", n.data, 64, 7, pad=3, stride=2)
    n["pool1/3x3_s2"] = L.Pooling(x, pool=P.Pooling.MAX, kernel_size=3, stride=2)
    n["pool1/norm1"] = L.LRN(n["pool1/3x3_s2"], **lrn)
    x = conv_relu(n, "conv2/3x3_reduce", "conv2/relu_3x3_reduce", n["pool1/norm1"], 64, 1)
    x = conv_relu(n, "conv2/3x3", "conv2/relu_3x3", x, 192, 3, pad=1)
    n["conv2/norm2"] = L.LRN(x, **lrn)
    n["pool2/3x3_s2"] = L.Pooling(n["conv2/norm2"], pool=P.Pooling.MAX, kernel_size=3, stride=2)
    x = n["pool2/3x3_s2"]
    for item in INCEPTION:
        if isinstance(item, str):
            n[item + "/3x3_s2"] = x = L.Pooling(x, pool=P.Pooling.MAX, kernel_size=3, stride=2)
        else:
            x = inception(n, item[0], x, item[1])
    n["pool5/7x7_s1"] = L.Pooling(x, pool=P.Pooling.AVE, kernel_size=7, stride=1)
    n["pool5/drop_7x7_s1"] = L.Dropout(n["pool5/7x7_s1"], in_place=True, dropout_ratio=0.4)
    n["loss3/classifier"] = L.InnerProduct(n["pool5/7x7_s1"], param=LEARN, num_output=num_classes)
    n.prob = L.Softmax(n["loss3/classifier"])
    return named("GoogleNet", n.to_proto())


def outputs():
    return {"googlenet_deploy.prototxt": deploy()}


if __name__ == "__main__":
    script_main(outputs, __file__)
