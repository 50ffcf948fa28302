"""LMDB-fed LeNet (small) for the exact-resume tests, in process and under mpiexec (run as a script:
``python lenet_lmdb.py --db D --workspace W --max_iter N [--resume] --out params.npz``)."""
import argparse
import os
import sys

import numpy as np

LENET = """name: "LeNet"
layer { name: "mnist" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { scale: 0.00390625 mirror: true crop_size: 24 }
  data_param { source: "%(db)s" batch_size: 4 backend: LMDB } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 5 weight_filler { type: "xavier" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
  inner_product_param { num_output: 16 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "drop1" type: "Dropout" bottom: "ip1" top: "ip1" dropout_param { dropout_ratio: 0.3 } }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
"""


def make_lmdb(path, n=22, seed=0):
    """An LMDB of ``n`` random 1 x 28 x 28 uint8 Datums with labels 0..9."""
    from caffepy.data import db as dbmod
    from caffepy.data.datum import array_to_datum
    rng = np.random.RandomState(seed)
    with dbmod.open_db(str(path), "lmdb", "w") as db:
        for i in range(n):
            d = array_to_datum(rng.randint(0, 256, (1, 28, 28)).astype(np.uint8), label=i % 10)
            db.put(b"%08d" % i, d.SerializeToString())
    return str(path)


def train(db, workspace, max_iter, resume=False, groups=1, workers=2, engine=None):
    """BSP training of the LeNet above; returns (solver, result)."""
    from caffepy import dist
    from caffepy.proto import caffe_pb2, io as proto_io
    from caffepy.solvers import get_solver
    param = caffe_pb2.SolverParameter()
    proto_io.parse_text('base_lr: 0.05 momentum: 0.9 lr_policy: "fixed" max_iter: %d display: 0 '
                        'random_seed: 7 snapshot_after_train: false' % max_iter, param)
    param.net_param.CopyFrom(proto_io.read_net(LENET % {"db": db}))
    solver = get_solver(param)
    cluster = caffe_pb2.ClusterParameter(nworker_groups=groups, nworkers_per_group=workers,
                                         nservers_per_group=1, workspace=str(workspace), timeout=30)
    if engine:
        cluster.engine = engine
    return solver, dist.train(solver, cluster=cluster, resume=resume)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--max_iter", type=int, required=True)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    from caffepy.errors import CaffeError
    try:
        solver, result = train(a.db, a.workspace, a.max_iter, a.resume, groups=2, workers=1)
    except CaffeError as e:
        sys.stderr.write("ERROR: %s\n" % e)     # one write: ranks' lines interleave whole
        return 1
    if result is not None and a.out:
        np.savez(a.out, *[p.data for p in solver.net.learnable_params])
        print("RESULT step=%d" % result.step)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    sys.exit(main())
