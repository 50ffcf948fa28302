"""Small nets, solvers and data for the distributed tests (also used by their MPI scripts)."""
import numpy as np

from caffepy.proto import caffe_pb2, io as proto_io

MLP = """name: "mlp"
layer { name: "data" type: "MemoryData" top: "data" top: "label"
        memory_data_param { batch_size: %(batch)d channels: 1 height: 4 width: 4 } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1" param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
        inner_product_param { num_output: 7 weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
"""

# DummyData (8 x 5, labels 1) -> InnerProduct 3 -> SoftmaxWithLoss: the command-line runs
DUMMY = """name: "dummy"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 8 dim: 5 } shape { dim: 8 }
                     data_filler { type: "gaussian" } data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 3
  weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""

SOLVER = """base_lr: 0.1 momentum: 0.9 weight_decay: 0.01 lr_policy: "step" gamma: 0.5 stepsize: 7
max_iter: %(max_iter)d random_seed: 5 display: 0 snapshot_after_train: false type: "%(type)s"
"""


def solver_param(batch, max_iter=20, solver_type="SGD", extra=""):
    text = SOLVER % {"max_iter": max_iter, "type": solver_type} + extra
    param = caffe_pb2.SolverParameter()
    proto_io.parse_text(text, param)
    param.net_param.CopyFrom(proto_io.read_net(MLP % {"batch": batch}))
    return param


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1, 4, 4))
    y = (x.reshape(n, -1)[:, :3].argmax(axis=1)).astype(np.float64)
    return x, y


def feeder(x, y):
    """Worker w of W gets rows w, w + W, ... (the items a Data layer would give it)."""
    def feed(w, nworkers, net):
        net.layers[0].reset(x[w::nworkers], y[w::nworkers])
    return feed


def cluster(**fields):
    c = caffe_pb2.ClusterParameter()
    for k, v in fields.items():
        if k == "consistency":
            v = caffe_pb2.ClusterParameter.Consistency.Value(v)
        if isinstance(v, (list, tuple)):
            getattr(c, k).extend(v)
        else:
            setattr(c, k, v)
    return c
