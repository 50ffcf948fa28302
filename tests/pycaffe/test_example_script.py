"""examples/pycaffe_script.py runs unchanged on a tiny net, weights and image made in a tmp dir."""
import os
import subprocess
import sys

import numpy as np
import pytest

import caffepy as caffe
from caffepy import layers as L
from tests.conftest import ROOT


def tiny_net(n, data):
    n.conv = L.Convolution(data, num_output=4, kernel_size=3, weight_filler=dict(type="xavier"))
    n.relu = L.ReLU(n.conv, in_place=True)
    n.pool = L.Pooling(n.conv, pool=caffe.params.Pooling.MAX, kernel_size=2, stride=2)
    n.fc = L.InnerProduct(n.pool, num_output=3, weight_filler=dict(type="xavier"))
    return n


@pytest.mark.slow
def test_example_script(tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image
    d = str(tmp_path)
    deploy = caffe.NetSpec()
    deploy.data = L.Input(shape=dict(dim=[1, 3, 12, 12]))
    tiny_net(deploy, deploy.data)
    deploy.prob = L.Softmax(deploy.fc)
    train = caffe.NetSpec()
    train.data, train.label = L.DummyData(shape=[dict(dim=[4, 3, 12, 12]), dict(dim=[4])],
                                          data_filler=[dict(type="gaussian", std=50), dict(type="constant")],
                                          ntop=2)
    tiny_net(train, train.data)
    train.loss = L.SoftmaxWithLoss(train.fc, train.label)
    paths = {k: os.path.join(d, k) for k in ("deploy.prototxt", "train.prototxt", "solver.prototxt",
                                             "w.caffemodel", "img.png", "out.caffemodel")}
    for key, spec in (("deploy.prototxt", deploy), ("train.prototxt", train)):
        with open(paths[key], "w") as f:
            f.write(str(spec.to_proto()))
    with open(paths["solver.prototxt"], "w") as f:
        f.write("net: '%s' base_lr: 0.01 lr_policy: 'fixed' momentum: 0.9 max_iter: 5 display: 0 "
                "snapshot_after_train: false snapshot_prefix: '%s/snap'\n" % (paths["train.prototxt"], d))
    caffe.Net(paths["deploy.prototxt"], caffe.TEST).save(paths["w.caffemodel"])
    Image.fromarray((np.random.default_rng(0).random((20, 16, 3)) * 255).astype(np.uint8)).save(paths["img.png"])
    args = [paths[k] for k in ("deploy.prototxt", "w.caffemodel", "img.png", "solver.prototxt", "out.caffemodel")]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "pycaffe_script.py")] + args,
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "before fine-tuning: class" in run.stdout and "fine-tuned 5 iterations" in run.stdout
    assert "after surgery" in run.stdout
    out = caffe.Net(paths["deploy.prototxt"], caffe.TEST, weights=paths["out.caffemodel"])
    assert (out.params["fc"][1].data == 0).all()
    with open(os.path.join(ROOT, "examples", "pycaffe_script.py")) as f:
        imports = [line for line in f if "caffepy" in line and line.startswith("import")]
    assert imports == ["import caffepy as caffe\n"]
