"""LeNet for MNIST (Caffe's examples/mnist lenet_train_test.prototxt and lenet.prototxt) in the DSL.

Run ``python models/lenet/lenet_netspec.py [out_dir]`` to regenerate
``lenet_netspec_train_test.prototxt`` and ``lenet_netspec_deploy.prototxt`` beside this file.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import caffepy  # noqa: E402
from caffepy import layers as L, params as P  # noqa: E402
from netspec_tools import named, script_main, with_test_data  # noqa: E402

LEARN = [dict(lr_mult=1), dict(lr_mult=2)]
FILLERS = dict(weight_filler=dict(type="xavier"), bias_filler=dict(type="constant"))


def mnist_data(n, phase, source, batch_size):
    n.data, n.label = L.Data(name="mnist", include=dict(phase=phase), ntop=2,
                             transform_param=dict(scale=0.00390625),
                             data_param=dict(source=source, batch_size=batch_size, backend=P.Data.LMDB))


def body(n):
    fill = FILLERS
    n.conv1 = L.Convolution(n.data, param=LEARN, num_output=20, kernel_size=5, stride=1, **fill)
    n.pool1 = L.Pooling(n.conv1, pool=P.Pooling.MAX, kernel_size=2, stride=2)
    n.conv2 = L.Convolution(n.pool1, param=LEARN, num_output=50, kernel_size=5, stride=1, **fill)
    n.pool2 = L.Pooling(n.conv2, pool=P.Pooling.MAX, kernel_size=2, stride=2)
    n.ip1 = L.InnerProduct(n.pool2, param=LEARN, num_output=500, **fill)
    n.relu1 = L.ReLU(n.ip1, in_place=True)
    n.ip2 = L.InnerProduct(n.ip1, param=LEARN, num_output=10, **fill)


def train_test():
    n = caffepy.NetSpec()
    mnist_data(n, caffepy.TRAIN, "examples/mnist/mnist_train_lmdb", 64)
    body(n)
    n.accuracy = L.Accuracy(n.ip2, n.label, include=dict(phase=caffepy.TEST))
    n.loss = L.SoftmaxWithLoss(n.ip2, n.label)
    return with_test_data("LeNet", n.to_proto(),
                          lambda t: mnist_data(t, caffepy.TEST, "examples/mnist/mnist_test_lmdb", 100))


def deploy(batch_size=64):
    n = caffepy.NetSpec()
    n.data = L.Input(shape=dict(dim=[batch_size, 1, 28, 28]))
    body(n)
    n.prob = L.Softmax(n.ip2)
    return named("LeNet", n.to_proto())


def outputs():
    return {"lenet_netspec_train_test.prototxt": train_test(), "lenet_netspec_deploy.prototxt": deploy()}


if __name__ == "__main__":
    script_main(outputs, __file__)
