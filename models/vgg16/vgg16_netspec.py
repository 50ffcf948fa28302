"""VGG-16 (Simonyan & Zisserman, configuration D; ImageNet deploy) in the DSL.

Run ``python models/vgg16/vgg16_netspec.py [out_dir]`` to regenerate ``vgg16_deploy.prototxt``.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import caffepy  # noqa: E402
from caffepy import layers as L, params as P  # noqa: E402
from netspec_tools import named, script_main  # noqa: E402


STAGES = [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]   # (channels, 3x3 convolutions)


def deploy(batch_size=1, num_classes=1000):
    n = caffepy.NetSpec()
    n.data = x = L.Input(shape=dict(dim=[batch_size, 3, 224, 224]))
    for s, (width, depth) in enumerate(STAGES, 1):
        for k in range(1, depth + 1):
            n["conv%d_%d" % (s, k)] = x = L.Convolution(x, num_output=width, pad=1, kernel_size=3)
            n["relu%d_%d" % (s, k)] = L.ReLU(x, in_place=True)
        n["pool%d" % s] = x = L.Pooling(x, pool=P.Pooling.MAX, kernel_size=2, stride=2)
    for k in (6, 7):
        n["fc%d" % k] = x = L.InnerProduct(x, num_output=4096)
        n["relu%d" % k] = L.ReLU(x, in_place=True)
        n["drop%d" % k] = L.Dropout(x, in_place=True, dropout_ratio=0.5)
    n.fc8 = L.InnerProduct(x, num_output=num_classes)
    n.prob = L.Softmax(n.fc8)
    return named("VGG_ILSVRC_16_layers", n.to_proto())


def outputs():
    return {"vgg16_deploy.prototxt": deploy()}


if __name__ == "__main__":
    script_main(outputs, __file__)
