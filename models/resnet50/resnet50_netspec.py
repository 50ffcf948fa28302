"""ResNet-50 (KaimingHe/deep-residual-networks prototxt/ResNet-50-deploy.prototxt) in the DSL.

Run ``python models/resnet50/resnet50_netspec.py [out_dir]`` to regenerate ``resnet50_deploy.prototxt``.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import caffepy  # noqa: E402
from caffepy import layers as L, params as P  # noqa: E402
from netspec_tools import named, script_main  # noqa: E402


STAGES = [(2, 64, 3), (3, 128, 4), (4, 256, 6), (5, 512, 3)]   # (stage, bottleneck width, blocks)


def conv_bn(n, bottom, conv, suffix, num_output, kernel_size, stride=1, pad=0, relu=None, bias=False):
    kw = {} if bias else dict(bias_term=False)
    n[conv] = L.Convolution(bottom, num_output=num_output, kernel_size=kernel_size, pad=pad,
                            stride=stride, **kw)
    n["bn" + suffix] = L.BatchNorm(n[conv], in_place=True, use_global_stats=True)
    n["scale" + suffix] = L.Scale(n[conv], in_place=True, bias_term=True)
    if relu:
        n[relu] = L.ReLU(n[conv], in_place=True)
    return n[conv]


def bottleneck(n, bottom, stage, block, width, stride):
    tag = "%d%s" % (stage, block)
    if block == "a":
        shortcut = conv_bn(n, bottom, "res%s_branch1" % tag, "%s_branch1" % tag, 4 * width, 1, stride)
    else:
        shortcut = bottom
    x = bottom
    for part, (k, s, pad, out) in zip("abc", ((1, stride, 0, width), (3, 1, 1, width), (1, 1, 0, 4 * width))):
        name = "res%s_branch2%s" % (tag, part)
        x = conv_bn(n, x, name, "%s_branch2%s" % (tag, part), out, k, s, pad,
                    relu=name + "_relu" if part != "c" else None)
    n["res" + tag] = L.Eltwise(shortcut, x)
    n["res%s_relu" % tag] = L.ReLU(n["res" + tag], in_place=True)
    return n["res" + tag]


def deploy(batch_size=1, num_classes=1000):
    n = caffepy.NetSpec()
    n.data = L.Input(shape=dict(dim=[batch_size, 3, 224, 224]))
    x = conv_bn(n, n.data, "conv1", "_conv1", 64, 7, 2, 3, relu="conv1_relu", bias=True)
    n.pool1 = x = L.Pooling(x, pool=P.Pooling.MAX, kernel_size=3, stride=2)
    for stage, width, blocks in STAGES:
        for b in range(blocks):
            x = bottleneck(n, x, stage, "abcdef"[b], width, 2 if (b == 0 and stage > 2) else 1)
    n.pool5 = L.Pooling(x, pool=P.Pooling.AVE, kernel_size=7, stride=1)
    n.fc1000 = L.InnerProduct(n.pool5, num_output=num_classes)
    n.prob = L.Softmax(n.fc1000)
    return named("ResNet-50", n.to_proto())


def outputs():
    return {"resnet50_deploy.prototxt": deploy()}


if __name__ == "__main__":
    script_main(outputs, __file__)
