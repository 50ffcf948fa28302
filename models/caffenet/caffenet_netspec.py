"""CaffeNet (BVLC reference CaffeNet, models/bvlc_reference_caffenet/deploy.prototxt) in the DSL.

Run ``python models/caffenet/caffenet_netspec.py [out_dir]`` to regenerate ``caffenet_deploy.prototxt``.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import caffepy  # noqa: E402
from caffepy import layers as L, params as P  # noqa: E402
from netspec_tools import named, script_main  # noqa: E402



def conv_relu(n, name, bottom, num_output, kernel_size, relu, **kw):
    n[name] = L.Convolution(bottom, num_output=num_output, kernel_size=kernel_size, **kw)
    n[relu] = L.ReLU(n[name], in_place=True)
    return n[name]


def fc(n, name, bottom, num_output, k):
    n[name] = L.InnerProduct(bottom, num_output=num_output)
    n["relu%d" % k] = L.ReLU(n[name], in_place=True)
    n["drop%d" % k] = L.Dropout(n[name], in_place=True, dropout_ratio=0.5)
    return n[name]


def deploy(batch_size=10, num_classes=1000):
    n = caffepy.NetSpec()
    n.data = L.Input(shape=dict(dim=[batch_size, 3, 227, 227]))
    lrn = dict(local_size=5, alpha=0.0001, beta=0.75)
    conv_relu(n, "conv1", n.data, 96, 11, "relu1", stride=4)
    n.pool1 = L.Pooling(n.conv1, pool=P.Pooling.MAX, kernel_size=3, stride=2)
    n.norm1 = L.LRN(n.pool1, **lrn)
    conv_relu(n, "conv2", n.norm1, 256, 5, "relu2", pad=2, group=2)
    n.pool2 = L.Pooling(n.conv2, pool=P.Pooling.MAX, kernel_size=3, stride=2)
    n.norm2 = L.LRN(n.pool2, **lrn)
    conv_relu(n, "conv3", n.norm2, 384, 3, "relu3", pad=1)
    conv_relu(n, "conv4", n.conv3, 384, 3, "relu4", pad=1, group=2)
    conv_relu(n, "conv5", n.conv4, 256, 3, "relu5", pad=1, group=2)
    n.pool5 = L.Pooling(n.conv5, pool=P.Pooling.MAX, kernel_size=3, stride=2)
    fc(n, "fc6", n.pool5, 4096, 6)
    fc(n, "fc7", n.fc6, 4096, 7)
    n.fc8 = L.InnerProduct(n.fc7, num_output=num_classes)
    n.prob = L.Softmax(n.fc8)
    return named("CaffeNet", n.to_proto())


def outputs():
    return {"caffenet_deploy.prototxt": deploy()}


if __name__ == "__main__":
    script_main(outputs, __file__)
