"""Small deterministic nets and solver files for command tests (written into a tmp dir)."""

# DummyData (gaussian data, constant labels) under the solver's random_seed: runs are reproducible.
CLASSIFIER = """
name: "tiny"
layer { name: "data" type: "DummyData" top: "data" top: "label"
        dummy_data_param { shape { dim: 6 dim: 4 } shape { dim: 6 }
                           data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "extra" type: "ReLU" bottom: "ip" top: "ip" include { stage: "relu" } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label" top: "accuracy"
        include { phase: TEST } }
"""

SOLVER = """net: "net.prototxt"
type: "%(type)s"
base_lr: 0.05
momentum: %(momentum)s
lr_policy: "step"
gamma: 0.5
stepsize: 4
max_iter: %(max_iter)d
display: 2
test_iter: 2
test_interval: 5
snapshot: 4
snapshot_prefix: "snap/tiny"
random_seed: 7
solver_mode: CPU
"""


def write(tmp_path, solver_type="SGD", max_iter=10, momentum=0.9, constant_data=False):
    net = CLASSIFIER
    if constant_data:
        net = net.replace('type: "gaussian" std: 1', 'type: "constant" value: 0.5')
    (tmp_path / "net.prototxt").write_text(net)
    (tmp_path / "solver.prototxt").write_text(
        SOLVER % dict(type=solver_type, max_iter=max_iter, momentum=momentum))
    (tmp_path / "snap").mkdir(exist_ok=True)
    return tmp_path
