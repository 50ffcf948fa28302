"""CIFAR-10 quick (Caffe's examples/cifar10 cifar10_quick_train_test.prototxt and
cifar10_quick.prototxt) in the DSL.

Run ``python models/cifar10_quick/cifar10_quick_netspec.py [out_dir]`` to regenerate
``cifar10_quick_train_test.prototxt`` and ``cifar10_quick_deploy.prototxt`` beside this file.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import caffepy  # noqa: E402
from caffepy import layers as L, params as P  # noqa: E402
from netspec_tools import named, script_main, with_test_data  # noqa: E402

LEARN = [dict(lr_mult=1), dict(lr_mult=2)]
MEAN = "examples/cifar10/mean.binaryproto"


def fillers(std, deploy):
    return {} if deploy else dict(weight_filler=dict(type="gaussian", std=std),
                                  bias_filler=dict(type="constant"))


def cifar_data(n, phase, source):
    n.data, n.label = L.Data(name="cifar", include=dict(phase=phase), ntop=2,
                             transform_param=dict(mean_file=MEAN),
                             data_param=dict(source=source, batch_size=100, backend=P.Data.LMDB))


def body(n, deploy=False):
    def conv(bottom, num_output, std):
        return L.Convolution(bottom, param=LEARN, num_output=num_output, pad=2, kernel_size=5, stride=1,
                             **fillers(std, deploy))
    n.conv1 = conv(n.data, 32, 0.0001)
    n.pool1 = L.Pooling(n.conv1, pool=P.Pooling.MAX, kernel_size=3, stride=2)
    n.relu1 = L.ReLU(n.pool1, in_place=True)
    n.conv2 = conv(n.pool1, 32, 0.01)
    n.relu2 = L.ReLU(n.conv2, in_place=True)
    n.pool2 = L.Pooling(n.conv2, pool=P.Pooling.AVE, kernel_size=3, stride=2)
    n.conv3 = conv(n.pool2, 64, 0.01)
    n.relu3 = L.ReLU(n.conv3, in_place=True)
    n.pool3 = L.Pooling(n.conv3, pool=P.Pooling.AVE, kernel_size=3, stride=2)
    n.ip1 = L.InnerProduct(n.pool3, param=LEARN, num_output=64, **fillers(0.1, deploy))
    n.ip2 = L.InnerProduct(n.ip1, param=LEARN, num_output=10, **fillers(0.1, deploy))


def train_test():
    n = caffepy.NetSpec()
    cifar_data(n, caffepy.TRAIN, "examples/cifar10/cifar10_train_lmdb")
    body(n)
    n.accuracy = L.Accuracy(n.ip2, n.label, include=dict(phase=caffepy.TEST))
    n.loss = L.SoftmaxWithLoss(n.ip2, n.label)
    return with_test_data("CIFAR10_quick", n.to_proto(),
                          lambda t: cifar_data(t, caffepy.TEST, "examples/cifar10/cifar10_test_lmdb"))


def deploy():
    n = caffepy.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 3, 32, 32]))
    body(n, deploy=True)
    n.prob = L.Softmax(n.ip2)
    return named("CIFAR10_quick_test", n.to_proto())


def outputs():
    return {"cifar10_quick_train_test.prototxt": train_test(),
            "cifar10_quick_deploy.prototxt": deploy()}


if __name__ == "__main__":
    script_main(outputs, __file__)
