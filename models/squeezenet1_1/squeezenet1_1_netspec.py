"""SqueezeNet v1.1 (forresti/SqueezeNet SqueezeNet_v1.1/deploy.prototxt) in the DSL.

Run ``python models/squeezenet1_1/squeezenet1_1_netspec.py [out_dir]`` to regenerate
``squeezenet1_1_deploy.prototxt``.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import caffepy  # noqa: E402
from caffepy import layers as L, params as P  # noqa: E402
from netspec_tools import named, script_main  # noqa: E402


# fire module: (squeeze 1x1, expand 1x1 = expand 3x3); "pool" = 3x3/2 max pooling
FIRES = [(16, 64), (16, 64), "pool3", (32, 128), (32, 128), "pool5", (48, 192), (48, 192),
         (64, 256), (64, 256)]


def conv_relu(n, name, relu, bottom, num_output, kernel_size, **kw):
    n[name] = L.Convolution(bottom, num_output=num_output, kernel_size=kernel_size, **kw)
    n[relu] = L.ReLU(n[name], in_place=True)
    return n[name]


def fire(n, k, bottom, squeeze, expand):
    p = "fire%d/" % k
    s = conv_relu(n, p + "squeeze1x1", p + "relu_squeeze1x1", bottom, squeeze, 1)
    e1 = conv_relu(n, p + "expand1x1", p + "relu_expand1x1", s, expand, 1)
    e3 = conv_relu(n, p + "expand3x3", p + "relu_expand3x3", s, expand, 3, pad=1)
    n[p + "concat"] = L.Concat(e1, e3)
    return n[p + "concat"]


def deploy(batch_size=10, num_classes=1000):
    n = caffepy.NetSpec()
    n.data = L.Input(shape=dict(dim=[batch_size, 3, 227, 227]))
    x = conv_relu(n, "conv1", "relu_conv1", n.data, 64, 3, stride=2)
    n.pool1 = x = L.Pooling(x, pool=P.Pooling.MAX, kernel_size=3, stride=2)
    k = 2
    for item in FIRES:
        if isinstance(item, str):
            n[item] = x = L.Pooling(x, pool=P.Pooling.MAX, kernel_size=3, stride=2)
        else:
            x = fire(n, k, x, *item)
            k += 1
    n.drop9 = L.Dropout(x, in_place=True, dropout_ratio=0.5)
    x = conv_relu(n, "conv10", "relu_conv10", x, num_classes, 1)
    n.pool10 = L.Pooling(x, pool=P.Pooling.AVE, global_pooling=True)
    n.prob = L.Softmax(n.pool10)
    return named("SqueezeNet_v1.1", n.to_proto())


def outputs():
    return {"squeezenet1_1_deploy.prototxt": deploy()}


if __name__ == "__main__":
    script_main(outputs, __file__)
