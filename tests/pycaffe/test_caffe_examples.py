"""The pycaffe steps of BVLC's examples, through ``import caffe``, on small nets:
00-classification, 01-learning-lenet, net_surgery, pascal-multilabel-with-datalayer (pyloss/linreg
is in test_user_python_layers.py)."""
import numpy as np
import pytest

import caffe
from caffe import layers as L, params as P
from caffe.proto import caffe_pb2


def _tiny_classifier(n, data):
    n.conv1 = L.Convolution(data, kernel_size=3, num_output=4, weight_filler=dict(type="xavier"))
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.ip1 = L.InnerProduct(n.pool1, num_output=8, weight_filler=dict(type="xavier"))
    n.relu1 = L.ReLU(n.ip1, in_place=True)
    n.score = L.InnerProduct(n.relu1, num_output=2, weight_filler=dict(type="xavier"))


def _solver(tmp_path, train, test=None, **fields):
    s = caffe_pb2.SolverParameter()
    s.train_net = str(train)
    if test:
        s.test_net.append(str(test))
        s.test_iter.append(2)
        s.test_interval = 1000
    s.base_lr, s.momentum, s.weight_decay, s.lr_policy = 0.05, 0.9, 5e-4, "fixed"
    s.display, s.max_iter, s.snapshot_after_train = 0, 100, False
    s.snapshot_prefix = str(tmp_path / "snap")
    for k, v in fields.items():
        setattr(s, k, v)
    path = tmp_path / "solver.prototxt"
    path.write_text(str(s))
    return str(path)


def test_00_classification(tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    caffe.set_mode_cpu()
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 3, 12, 12]))
    _tiny_classifier(n, n.data)
    n.prob = L.Softmax(n.score)
    (tmp_path / "deploy.prototxt").write_text(str(n.to_proto()))
    trained = caffe.Net(str(tmp_path / "deploy.prototxt"), caffe.TEST)
    trained.save(str(tmp_path / "w.caffemodel"))
    net = caffe.Net(str(tmp_path / "deploy.prototxt"), str(tmp_path / "w.caffemodel"), caffe.TEST)
    mu = np.array([104.0, 117.0, 123.0])
    transformer = caffe.io.Transformer({"data": net.blobs["data"].data.shape})
    transformer.set_transpose("data", (2, 0, 1))
    transformer.set_mean("data", mu)
    transformer.set_raw_scale("data", 255)
    transformer.set_channel_swap("data", (2, 1, 0))
    net.blobs["data"].reshape(3, 3, 12, 12)
    rgb = (np.random.RandomState(0).rand(20, 16, 3) * 255).astype(np.uint8)
    PIL.fromarray(rgb).save(str(tmp_path / "cat.png"))
    image = caffe.io.load_image(str(tmp_path / "cat.png"))
    assert image.shape == (20, 16, 3) and image.max() <= 1.0
    transformed = transformer.preprocess("data", caffe.io.resize_image(image, (12, 12)))
    assert transformed.shape == (3, 12, 12)
    # preprocess: BGR, scaled to 0..255, mean subtracted, channels first
    resized = caffe.io.resize_image(image, (12, 12))
    expect = resized[:, :, ::-1].transpose(2, 0, 1) * 255 - mu[:, None, None]
    assert np.allclose(transformed, expect, atol=1e-3)
    net.blobs["data"].data[...] = transformed
    output = net.forward()
    prob = output["prob"][0]
    assert output["prob"].shape == (3, 2) and np.isclose(prob.sum(), 1, atol=1e-5)
    assert prob.argsort()[::-1][0] == prob.argmax()
    assert [(k, v.data.shape) for k, v in net.blobs.items()][-1] == ("prob", (3, 2))
    assert [(k, v[0].data.shape) for k, v in net.params.items()][0] == ("conv1", (4, 3, 3, 3))
    assert np.allclose(transformer.deprocess("data", transformed), resized, atol=1e-4)


def _lmdb(path, n, rng):
    lmdb = pytest.importorskip("lmdb")
    images = np.zeros((n, 1, 12, 12), np.uint8)
    labels = rng.randint(2, size=n)
    for i, y in enumerate(labels):                 # class 0: bright top half, class 1: bottom
        images[i, 0, :6] = 200 if y == 0 else 20
        images[i, 0, 6:] = 20 if y == 0 else 200
    env = lmdb.open(str(path), map_size=1 << 24)
    with env.begin(write=True) as txn:
        for i, (img, y) in enumerate(zip(images, labels)):
            txn.put(("%08d" % i).encode(), caffe.io.array_to_datum(img, int(y)).SerializeToString())
    env.close()
    return str(path)


def _lenet(source, batch_size):
    n = caffe.NetSpec()
    n.data, n.label = L.Data(batch_size=batch_size, backend=P.Data.LMDB, source=source,
                             transform_param=dict(scale=1. / 255), ntop=2)
    _tiny_classifier(n, n.data)
    n.loss = L.SoftmaxWithLoss(n.score, n.label)
    return n.to_proto()


def test_01_learning_lenet(tmp_path):
    rng = np.random.RandomState(0)
    train_db, test_db = _lmdb(tmp_path / "train_lmdb", 64, rng), _lmdb(tmp_path / "test_lmdb", 32, rng)
    (tmp_path / "train.prototxt").write_text(str(_lenet(train_db, 16)))
    (tmp_path / "test.prototxt").write_text(str(_lenet(test_db, 16)))
    caffe.set_random_seed(1)
    solver = caffe.SGDSolver(_solver(tmp_path, tmp_path / "train.prototxt",
                                     tmp_path / "test.prototxt"))
    assert [(k, v.data.shape) for k, v in solver.net.blobs.items()][0] == ("data", (16, 1, 12, 12))
    solver.net.forward()
    solver.test_nets[0].forward()
    assert solver.net.blobs["label"].data.shape == (16,)
    solver.step(1)
    assert solver.net.params["conv1"][0].diff.any()
    losses, accuracy = [], 0.0
    for _ in range(30):
        solver.step(1)
        losses.append(float(solver.net.blobs["loss"].data))
    for _ in range(2):
        solver.test_nets[0].forward()
        accuracy += np.mean(solver.test_nets[0].blobs["score"].data.argmax(1)
                            == solver.test_nets[0].blobs["label"].data) / 2
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) and accuracy > 0.9


def test_net_surgery(tmp_path):
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 2, 4, 4]))
    n.fc = L.InnerProduct(n.data, num_output=3, weight_filler=dict(type="gaussian", std=1),
                          bias_filler=dict(type="constant", value=0.5))
    (tmp_path / "fc.prototxt").write_text(str(n.to_proto()))
    full = caffe.NetSpec()
    full.data = L.Input(shape=dict(dim=[1, 2, 6, 6]))
    full.fc_conv = L.Convolution(full.data, num_output=3, kernel_size=4)
    (tmp_path / "conv.prototxt").write_text(str(full.to_proto()))
    net = caffe.Net(str(tmp_path / "fc.prototxt"), caffe.TEST)
    net_full_conv = caffe.Net(str(tmp_path / "conv.prototxt"), caffe.TEST)
    fc_params = {pr: (net.params[pr][0].data, net.params[pr][1].data) for pr in ["fc"]}
    assert fc_params["fc"][0].shape == (3, 32)
    net_full_conv.params["fc_conv"][0].data.flat = fc_params["fc"][0].flat     # transplant
    net_full_conv.params["fc_conv"][1].data[...] = fc_params["fc"][1]
    net_full_conv.save(str(tmp_path / "full_conv.caffemodel"))
    reloaded = caffe.Net(str(tmp_path / "conv.prototxt"), str(tmp_path / "full_conv.caffemodel"),
                         caffe.TEST)
    x = np.random.RandomState(2).rand(1, 2, 6, 6).astype(np.float32)
    reloaded.blobs["data"].data[...] = x
    out = reloaded.forward()["fc_conv"]
    assert out.shape == (1, 3, 3, 3)
    net.blobs["data"].data[...] = x[:, :, 1:5, 2:6]                           # one window
    assert np.allclose(out[0, :, 1, 2], net.forward()["fc"][0], atol=1e-4)
    # designer filters: set weights by hand, reshape the input, forward
    reloaded.blobs["data"].reshape(1, 2, 8, 8)
    reloaded.reshape()
    reloaded.params["fc_conv"][0].data[...] = 0
    reloaded.params["fc_conv"][0].data[0, 0, 0, 0] = 1                         # picks a pixel
    reloaded.params["fc_conv"][1].data[...] = 0
    y = np.random.RandomState(3).rand(1, 2, 8, 8).astype(np.float32)
    reloaded.blobs["data"].data[...] = y
    assert np.allclose(reloaded.forward()["fc_conv"][0, 0], y[0, 0, :5, :5])


MULTILABEL_LAYER = '''import caffe
import numpy as np


class MultilabelDataLayerSync(caffe.Layer):
    """Images whose channel c is bright iff label c is set (as pascal_multilabel_datalayers)."""

    def setup(self, bottom, top):
        self.top_names = ['data', 'label']
        params = eval(self.param_str)
        self.batch_size, self.im_shape = params['batch_size'], params['im_shape']
        self.rng = np.random.RandomState(params.get('seed', 0))
        top[0].reshape(self.batch_size, 3, self.im_shape[0], self.im_shape[1])
        top[1].reshape(self.batch_size, 3)

    def forward(self, bottom, top):
        labels = self.rng.randint(2, size=(self.batch_size, 3)).astype(np.float32)
        top[1].data[...] = labels
        top[0].data[...] = labels[:, :, None, None] + 0.1 * self.rng.randn(*top[0].shape)

    def reshape(self, bottom, top):
        pass

    def backward(self, top, propagate_down, bottom):
        pass
'''


def test_pascal_multilabel_with_datalayer(tmp_path, monkeypatch):
    (tmp_path / "multilabel_datalayers.py").write_text(MULTILABEL_LAYER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "multilabel_datalayers", raising=False)

    def caffenet_multilabel(split, seed):
        n = caffe.NetSpec()
        pydata_params = dict(split=split, batch_size=8, im_shape=[6, 6], seed=seed)
        n.data, n.label = L.Python(module="multilabel_datalayers", layer="MultilabelDataLayerSync",
                                   ntop=2, param_str=str(pydata_params))
        n.conv1 = L.Convolution(n.data, kernel_size=3, num_output=6,
                                weight_filler=dict(type="xavier"))
        n.relu1 = L.ReLU(n.conv1, in_place=True)
        n.score = L.InnerProduct(n.relu1, num_output=3, weight_filler=dict(type="xavier"))
        n.loss = L.SigmoidCrossEntropyLoss(n.score, n.label)
        return str(n.to_proto())

    (tmp_path / "trainnet.prototxt").write_text(caffenet_multilabel("train", 0))
    (tmp_path / "valnet.prototxt").write_text(caffenet_multilabel("val", 1))
    caffe.set_random_seed(0)
    solver = caffe.SGDSolver(_solver(tmp_path, tmp_path / "trainnet.prototxt",
                                     tmp_path / "valnet.prototxt"))
    assert solver.net.blobs["label"].data.shape == (8, 3)
    solver.step(40)

    def hamming_distance(gt, est):
        return sum([1 for (g, e) in zip(gt, est) if g == e]) / float(len(gt))

    acc = 0.0
    net = solver.test_nets[0]
    for _ in range(4):
        net.forward()
        gts, ests = net.blobs["label"].data, net.blobs["score"].data > 0
        acc += sum(hamming_distance(g, e) for g, e in zip(gts, ests)) / len(gts) / 4
    assert acc > 0.9
