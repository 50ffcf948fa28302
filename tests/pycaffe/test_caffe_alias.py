"""``import caffe`` is caffepy: the alias package, and what BVLC's python/caffe/test checks, written
against the ``caffe`` name (test_net, test_solver, test_net_spec, test_layer_type_list, test_io,
test_python_layer(_with_param_str), test_coord_map, test_draw)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import caffe
import caffe.draw
import caffepy

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE = "tests.pycaffe.test_caffe_alias"


def _python(code, env=None, cwd=None):
    full = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, cwd=cwd or "/", timeout=60)


# -- the alias itself ---------------------------------------------------------------------------
def test_caffe_names_are_caffepy_objects():
    import caffe.proto.caffe_pb2
    from caffe.proto import caffe_pb2
    from caffe import layers as L, params as P
    import caffe.io, caffe.draw, caffe.net_spec, caffe.coord_map, caffe.classifier, caffe.detector
    assert caffe_pb2 is caffepy.proto.caffe_pb2 is caffe.proto.caffe_pb2
    assert caffe.proto is caffepy.proto
    assert caffe.io is caffepy.io and caffe.draw is caffepy.draw
    assert caffe.net_spec is caffepy.netspec and caffe.coord_map is caffepy.pycaffe.coord_map
    assert caffe.classifier is caffepy.pycaffe.classifier and caffe.detector is caffepy.pycaffe.detector
    assert L is caffepy.layers and P is caffepy.params
    for name in ("Net", "Layer", "SGDSolver", "AdamSolver", "get_solver", "Classifier",
                 "Detector", "NetSpec", "to_proto", "layer_type_list", "set_mode_cpu", "NCCL",
                 "Timer", "get_solver_from_string"):
        assert getattr(caffe, name) is getattr(caffepy, name), name
    assert caffe.TRAIN == caffepy.TRAIN and caffe.TEST == caffepy.TEST


def test_compiled_module_name():
    """Python layers that import from pycaffe's compiled module get caffepy's objects and lists."""
    from caffe._caffe import BlobVec, Net, RawBlobVec, layer_type_list, set_mode_cpu
    import caffe._caffe
    assert Net is caffepy.Net and set_mode_cpu is caffepy.set_mode_cpu
    assert layer_type_list is caffepy.layer_type_list and hasattr(BlobVec(), "add_blob")
    assert isinstance(RawBlobVec([1, 2]), list) and RawBlobVec([1, 2])[1] == 2
    with pytest.raises(AttributeError, match="caffe._caffe"):
        caffe._caffe.no_such_name


def test_star_import_and_one_descriptor_pool():
    out = _python("from caffe import *\n"
                  "import caffepy.proto.caffe_pb2 as a, caffe.proto.caffe_pb2 as b\n"
                  "from google.protobuf import descriptor_pool\n"
                  "assert a is b and Net is __import__('caffepy').Net\n"
                  "print(descriptor_pool.Default().FindFileByName('caffe.proto').name)",
                  env={"PYTHONPATH": REPO})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "caffe.proto"


def test_alias_off_and_real_pycaffe_first(tmp_path):
    off = _python("import caffe", env={"PYTHONPATH": REPO, "CAFFEPY_CAFFE_ALIAS": "0"})
    assert off.returncode != 0 and "CAFFEPY_CAFFE_ALIAS" in off.stderr.splitlines()[-1]
    real = tmp_path / "caffe"
    real.mkdir()
    (real / "__init__.py").write_text("REAL = True\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), REPO])}
    first = _python("import caffe; print(caffe.REAL)", env=env)
    assert first.returncode == 0 and first.stdout.strip() == "True", first.stderr
    later = _python("import caffe; print(caffe.REAL)",       # alias off: the next caffe loads
                    env={"PYTHONPATH": os.pathsep.join([REPO, str(tmp_path)]),
                         "CAFFEPY_CAFFE_ALIAS": "off"})
    assert later.returncode == 0 and later.stdout.strip() == "True", later.stderr


def test_nccl_is_a_clear_stub():
    assert caffe.has_nccl() is False
    with pytest.raises(caffepy.errors.CaffeError, match="NCCL is not supported"):
        caffe.NCCL(None, "")
    with pytest.raises(caffepy.errors.CaffeError, match="NCCL is not supported"):
        caffe.NCCL.new_uid()


# -- BVLC test_net -------------------------------------------------------------------------------
NET = """name: 'testnet' force_backward: true
layer { type: 'DummyData' name: 'data' top: 'data' top: 'label'
  dummy_data_param { num: 5 channels: 2 height: 3 width: 4  num: 5 channels: 1 height: 1 width: 1
    data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' } } }
layer { type: 'Convolution' name: 'conv' bottom: 'data' top: 'conv'
  convolution_param { num_output: 11 kernel_size: 2 pad: 3
    weight_filler { type: 'gaussian' std: 1 } bias_filler { type: 'constant' value: 2 } }
  param { decay_mult: 1 } param { decay_mult: 0 } }
layer { type: 'InnerProduct' name: 'ip' bottom: 'conv' top: 'ip_blob'
  inner_product_param { num_output: 13
    weight_filler { type: 'gaussian' std: 2.5 } bias_filler { type: 'constant' value: -3 } } }
layer { type: 'SoftmaxWithLoss' name: 'loss' bottom: 'ip_blob' bottom: 'label' top: 'loss' }
"""


@pytest.fixture
def net(tmp_path):
    path = tmp_path / "net.prototxt"
    path.write_text(NET)
    n = caffe.Net(str(path), caffe.TRAIN)
    n.blobs["label"].data[...] = np.random.RandomState(0).randint(13, size=n.blobs["label"].shape)
    return n


def test_net_pycaffe_surface(net, tmp_path):
    assert list(net.layer_dict) == list(net._layer_names)
    assert net.inputs == [] and net.outputs == ["loss"]
    assert net.top_names["conv"] == ["conv"] and net.bottom_names["loss"] == ["ip_blob", "label"]
    params = [b for v in net.params.values() for b in v]
    loss = float(net.forward()["loss"])
    net.backward()
    assert np.isfinite(loss) and any(np.abs(p.diff).sum() > 0 for p in params)
    net.clear_param_diffs()
    assert all(not p.diff.any() for p in params)
    # forward / backward between named layers
    ip_in = net.blobs["conv"].data.copy()
    out = net.forward(start="ip", end="ip")
    w, b = net.params["ip"][0].data, net.params["ip"][1].data
    assert np.allclose(out["ip_blob"], ip_in.reshape(5, -1) @ w.T + b, atol=1e-3)
    net.blobs["ip_blob"].diff[...] = 1.0
    grads = net.backward(start="ip", end="ip")
    assert np.allclose(grads["conv"].reshape(5, -1), np.ones((5, 13)) @ w, atol=1e-4)
    # save and read back; hdf5 too
    path = str(tmp_path / "w.caffemodel")
    net.save(path)
    other = caffe.Net(str(tmp_path / "net.prototxt"), path, caffe.TRAIN)
    for name in net.params:
        for a, b in zip(net.params[name], other.params[name]):
            assert np.array_equal(a.data, b.data)
    pytest.importorskip("h5py")
    net.save_hdf5(str(tmp_path / "w.h5"))
    other.params["ip"][0].data[...] = 0
    other.load_hdf5(str(tmp_path / "w.h5"))
    assert np.array_equal(other.params["ip"][0].data, net.params["ip"][0].data)


def test_blob_memory_outlives_the_net(net):
    params = [b for v in net.params.values() for b in v]
    blobs = list(net.blobs.values())
    del net
    assert np.isfinite(sum(float(b.data.sum() + b.diff.sum()) for b in params + blobs))


# -- BVLC test_solver ----------------------------------------------------------------------------
def test_solver_solve_step_snapshot(tmp_path):
    (tmp_path / "net.prototxt").write_text(NET)
    solver_text = ("net: '%s' test_iter: 2 test_interval: 100 base_lr: 0.01 momentum: 0.9 "
                   "weight_decay: 0.0005 lr_policy: 'inv' gamma: 0.0001 power: 0.75 display: 100 "
                   "max_iter: 10 snapshot_after_train: false snapshot_prefix: '%s'"
                   % (tmp_path / "net.prototxt", tmp_path / "snap"))
    (tmp_path / "solver.prototxt").write_text(solver_text)
    solver = caffe.SGDSolver(str(tmp_path / "solver.prototxt"))
    assert isinstance(solver, caffe.SGDSolver)
    for n in [solver.net] + list(solver.test_nets):
        n.blobs["label"].data[...] = 1
    solver.solve()
    assert solver.iter == 10
    solver.step(2)
    assert solver.iter == 12 and solver.lr > 0
    solver.snapshot()
    assert (tmp_path / "snap_iter_12.caffemodel").exists()
    assert (tmp_path / "snap_iter_12.solverstate").exists()
    from_string = caffe.get_solver_from_string(solver_text)
    assert from_string.param.max_iter == 10 and from_string.iter == 0
    calls = []
    from_string.add_callback(lambda: calls.append("s"), lambda: calls.append("g"))
    from_string.step(1)
    assert calls == ["s", "g"]


# -- BVLC test_net_spec and test_layer_type_list --------------------------------------------------
def test_net_spec_and_layer_type_list():
    from caffe import layers as L, params as P
    n = caffe.NetSpec()
    n.data, n.label = L.DummyData(shape=[dict(dim=[4, 1, 8, 8]), dict(dim=[4])], ntop=2)
    n.conv = L.Convolution(n.data, kernel_size=3, num_output=4, weight_filler=dict(type="xavier"))
    n.pool = L.Pooling(n.conv, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.ip = L.InnerProduct(n.pool, num_output=3)
    n.relu = L.ReLU(n.ip, in_place=True)
    n.loss = L.SoftmaxWithLoss(n.ip, n.label)
    proto = n.to_proto()
    assert isinstance(proto, caffe.proto.caffe_pb2.NetParameter)
    assert [lp.type for lp in proto.layer][1:3] == ["Convolution", "Pooling"]
    assert proto.layer[4].top[0] == "ip"                          # in place
    silent = caffe.NetSpec()
    silent.data, silent.label = L.DummyData(shape=[dict(dim=[2, 3])] * 2, ntop=2)
    silent.out = L.Silence(silent.data, silent.label, ntop=0)     # zero tops
    assert list(silent.to_proto().layer[1].top) == []
    pair = L.DummyData(ntop=2)
    with pytest.raises(TypeError, match="Silence input 0 is not a Top"):
        L.Silence(pair, ntop=0)                                   # a tuple, not a Top
    L.Silence(*pair, ntop=0)
    types = caffe.layer_type_list()
    assert types == sorted(types) and {"Convolution", "Python", "Data"} <= set(types)


# -- BVLC test_io --------------------------------------------------------------------------------
def test_io_blobproto_datum_resize():
    arr = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    assert np.array_equal(caffe.io.blobproto_to_array(caffe.io.array_to_blobproto(arr)), arr)
    for dtype in (np.uint8, np.float64):
        a = np.arange(2 * 3 * 4).reshape(2, 3, 4).astype(dtype)
        datum = caffe.io.array_to_datum(a, label=3)
        assert datum.label == 3 and np.array_equal(caffe.io.datum_to_array(datum), a)
    img = np.random.RandomState(1).rand(6, 8, 3).astype(np.float32)
    assert caffe.io.resize_image(img, (12, 16)).shape == (12, 16, 3)
    assert caffe.io.resize_image(np.full((6, 8, 1), 0.5, np.float32), (3, 4)).shape == (3, 4, 1)


# -- BVLC test_python_layer and test_python_layer_with_param_str ----------------------------------
class TimesTen(caffe.Layer):
    def setup(self, bottom, top):
        self.factor = float(self.param_str) if self.param_str else 10.0

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        top[0].data[...] = self.factor * bottom[0].data

    def backward(self, top, propagate_down, bottom):
        bottom[0].diff[...] = self.factor * top[0].diff


class PhaseLayer(caffe.Layer):
    def setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):
        top[0].reshape()

    def forward(self, bottom, top):
        top[0].data[()] = self.phase


class ParamLayer(caffe.Layer):
    def setup(self, bottom, top):
        self.blobs.add_blob(1)
        self.blobs[0].data[0] = 0

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        top[0].data[...] = bottom[0].data + self.blobs[0].data[0]

    def backward(self, top, propagate_down, bottom):
        self.blobs[0].diff[0] = top[0].diff.sum()


def _py(name, bottom, top, cls, param_str=None):
    ps = " param_str: '%s'" % param_str if param_str else ""
    return ("layer { type: 'Python' name: '%s' bottom: '%s' top: '%s' python_param { module: "
            "'%s' layer: '%s'%s } }\n" % (name, bottom, top, MODULE, cls, ps))


def test_python_layers(tmp_path):
    path = tmp_path / "py.prototxt"
    path.write_text("name: 'pythonnet' force_backward: true\n"
                    "input: 'data' input_shape { dim: 10 dim: 9 dim: 8 }\n"
                    + _py("one", "data", "one", "TimesTen") + _py("two", "one", "two", "TimesTen")
                    + _py("three", "two", "three", "TimesTen", "2"))
    net = caffe.Net(str(path), caffe.TRAIN)
    x = np.random.RandomState(0).rand(10, 9, 8).astype(np.float32)
    net.blobs["data"].data[...] = x
    assert np.allclose(net.forward()["three"], 200 * x, rtol=1e-5)
    net.blobs["three"].diff[...] = x
    assert np.allclose(net.backward()["data"], 200 * x, rtol=1e-5)
    net.blobs["data"].reshape(4, 2, 3)                            # reshape propagates
    net.forward()
    assert net.blobs["three"].data.shape == (4, 2, 3)
    phase = tmp_path / "phase.prototxt"
    phase.write_text("input: 'data' input_shape { dim: 1 }\n" + _py("p", "data", "p", "PhaseLayer"))
    for ph in (caffe.TRAIN, caffe.TEST):
        assert int(caffe.Net(str(phase), ph).forward()["p"]) == ph
    param = tmp_path / "param.prototxt"
    param.write_text("name: 'p' force_backward: true input: 'data' input_shape { dim: 4 dim: 2 }\n"
                     + _py("plus", "data", "out", "ParamLayer")
                     + "layer { type: 'Reduction' name: 'sum' bottom: 'out' top: 'loss' "
                       "loss_weight: 1 }\n")
    solver_file = tmp_path / "solver.prototxt"
    solver_file.write_text("net: '%s' base_lr: 1 lr_policy: 'fixed' max_iter: 1 display: 0 "
                           "snapshot_after_train: false" % param)
    solver = caffe.SGDSolver(str(solver_file))
    solver.net.blobs["data"].data[...] = 1
    solver.step(1)
    assert np.allclose(solver.net.params["plus"][0].data, -8)   # lr 1 x gradient 8
    solver.net.save(str(tmp_path / "p.caffemodel"))
    reloaded = caffe.Net(str(param), str(tmp_path / "p.caffemodel"), caffe.TRAIN)
    assert np.allclose(reloaded.params["plus"][0].data, -8)


# -- BVLC test_coord_map and test_draw -----------------------------------------------------------
def test_coord_map_and_draw(tmp_path):
    from caffe import layers as L
    from caffe.coord_map import coord_map_from_to, crop
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 3, 100, 100]))
    n.conv = L.Convolution(n.data, num_output=2, kernel_size=3, pad=1)      # x_data = x_conv
    n.pool = L.Pooling(n.conv, kernel_size=2, stride=2)                     # = 2 x_pool + 0.5
    n.deconv = L.Deconvolution(n.pool, convolution_param=dict(num_output=2, kernel_size=4,
                                                              stride=2))    # x_pool = x/2 - 0.75
    ax, a, b = coord_map_from_to(n.deconv, n.data)
    assert ax == 1 and a == 1 and b == -1
    n.crop = crop(n.deconv, n.data)
    proto = n.to_proto()
    assert proto.layer[-1].type == "Crop" and proto.layer[-1].crop_param.offset == [1]
    net = caffe.Net(str(_write(tmp_path / "c.prototxt", proto)), caffe.TEST)
    assert net.blobs["crop"].data.shape[2:] == (100, 100)
    text = caffe.draw.get_dot(proto, "LR")
    assert "deconv" in text and "Crop" in text
    pytest.importorskip("graphviz")
    try:
        png = caffe.draw.draw_net(proto, "LR")        # BVLC's test_draw: draw_net(net, 'LR')
    except caffepy.errors.CaffeError as e:             # no `dot` program on this machine
        pytest.skip(str(e))
    assert png[:4] == b"\x89PNG"


def _write(path, proto):
    path.write_text(str(proto))
    return path
