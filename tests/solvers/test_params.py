"""lr policies as a table, and solver files validated when they are loaded."""
import math
import os

import numpy as np
import pytest

from caffepy.errors import CaffeError, ProtoError, SolverError
from caffepy.proto import caffe_pb2
from caffepy.solvers import SOLVERS, get_solver, load_solver_param, lr_policies
from caffepy.solvers.params import SOLVER_TYPES

from .helpers import REGRESSION_NET, make_solver


class _State(object):
    current_step = 0


def _param(**kw):
    p = caffe_pb2.SolverParameter()
    for k, v in kw.items():
        if isinstance(v, list):
            getattr(p, k).extend(v)
        else:
            setattr(p, k, v)
    return p


def test_policy_values():
    p = _param(base_lr=0.1, gamma=0.5, stepsize=3, power=2.0, max_iter=10)
    st = _State()
    f32 = lambda v: float(np.float32(v))  # noqa: E731  (proto float fields)
    table = {
        "fixed": lambda it: f32(0.1),
        "step": lambda it: f32(0.1) * 0.5 ** (it // 3),
        "exp": lambda it: f32(0.1) * 0.5 ** it,
        "inv": lambda it: f32(0.1) * (1 + 0.5 * it) ** -2.0,
        "poly": lambda it: f32(0.1) * (1 - it / 10.0) ** 2.0,
        "sigmoid": lambda it: f32(0.1) / (1 + math.exp(-0.5 * (it - 3))),
    }
    for policy, want in table.items():
        p.lr_policy = policy
        lr_policies.validate(p)
        for it in range(10):
            assert lr_policies.learning_rate(p, it, st) == pytest.approx(want(it), rel=1e-12), policy


def test_multistep_advances_one_step_per_call_and_step_sets_current_step():
    p = _param(base_lr=1.0, gamma=0.1, lr_policy="multistep", stepvalue=[2, 4])
    st = _State()
    rates = [lr_policies.learning_rate(p, it, st) for it in range(6)]
    assert rates == pytest.approx([1, 1, 0.1, 0.1, 0.01, 0.01])
    assert st.current_step == 2
    p = _param(base_lr=1.0, gamma=0.5, lr_policy="step", stepsize=4)
    lr_policies.learning_rate(p, 9, st)
    assert st.current_step == 2


@pytest.mark.parametrize("text, msg", [
    ('lr_policy: "cosine"', "unknown lr_policy 'cosine'; known policies: exp, fixed, inv"),
    ('', "no lr_policy given"),
    ('lr_policy: "step" gamma: 0.1', "stepsize must be > 0"),
    ('lr_policy: "step" stepsize: 10 gamma: -1', "gamma must be >= 0"),
    ('lr_policy: "sigmoid" gamma: 0.1', "stepsize must be > 0"),
    ('lr_policy: "poly" power: 1', "max_iter must be > 0"),
    ('lr_policy: "fixed" type: "Adamax"', "unknown solver type 'Adamax'; known types: SGD, Nesterov"),
    ('lr_policy: "fixed" regularization_type: "L3"', "unknown regularization_type 'L3'"),
    ('lr_policy: "fixed" average_loss: 0', "average_loss should be >= 1"),
    ('lr_policy: "fixed" iter_size: 0', "iter_size should be >= 1"),
])
def test_invalid_settings_fail_at_load(text, msg, tmp_path):
    path = tmp_path / "s.prototxt"
    path.write_text('net: "n.prototxt"\nbase_lr: 0.1\nmax_iter: 0\n' + text + "\n")
    with pytest.raises(SolverError) as e:
        load_solver_param(str(path))
    assert msg in str(e.value)
    assert str(path) in str(e.value)
    assert "\n" not in str(e.value)


def test_solver_specific_checks():
    with pytest.raises(SolverError, match="Momentum cannot be used with AdaGrad"):
        make_solver('type: "AdaGrad" base_lr: 0.1 lr_policy: "fixed" momentum: 0.9')
    with pytest.raises(SolverError, match="Momentum cannot be used with RMSProp"):
        make_solver('type: "RMSProp" base_lr: 0.1 lr_policy: "fixed" momentum: 0.9')
    with pytest.raises(SolverError, match="rms_decay should lie between 0 and 1"):
        make_solver('type: "RMSProp" base_lr: 0.1 lr_policy: "fixed" rms_decay: 1.5')


def test_registry_and_legacy_solver_type():
    assert set(SOLVERS) == set(SOLVER_TYPES)
    for value, name in enumerate(["SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"]):
        s = make_solver('solver_type: %s base_lr: 0.1 lr_policy: "fixed"'
                        % caffe_pb2.SolverParameter.SolverType.Name(value))
        assert type(s).type == name and s.param.type == name
    with pytest.raises(CaffeError, match="both"):
        load_solver_param('net: "x"\nsolver_type: ADAM\ntype: "Adam"\nlr_policy: "fixed"')


def test_syntax_error_names_file_line(tmp_path):
    path = tmp_path / "bad.prototxt"
    path.write_text('net: "n.prototxt"\nbase_lr 0.1 0.2\n')
    with pytest.raises(ProtoError, match=r"bad.prototxt:2:"):
        load_solver_param(str(path))


def test_train_net_fields(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.prototxt").write_text(REGRESSION_NET)
    base = 'base_lr: 0.1 lr_policy: "fixed" '
    for field in ("net", "train_net"):
        s = get_solver('%s: "net.prototxt" %s' % (field, base))
        assert s.net.name == "regression" and s.test_nets == []
    s = get_solver('train_net_param { %s } %s' % (REGRESSION_NET, base))
    assert s.net.name == "regression"
    with pytest.raises(SolverError, match="must specify a train net"):
        get_solver(base)
    with pytest.raises(SolverError, match="must not contain more than one"):
        get_solver('net: "net.prototxt" train_net: "net.prototxt" ' + base)
    with pytest.raises(SolverError, match="relative to the current directory"):
        get_solver('net: "missing.prototxt" ' + base)


def test_snapshot_prefix_upgrade(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkdir("snaps")
    (tmp_path / "solver.prototxt").write_text('net: "n"\nlr_policy: "fixed"\nsnapshot_prefix: "snaps"\n')
    assert load_solver_param("solver.prototxt").snapshot_prefix == os.path.join("snaps", "solver")
    (tmp_path / "s2.prototxt").write_text('net: "n"\nlr_policy: "fixed"\n')
    assert load_solver_param("s2.prototxt").snapshot_prefix == "s2"


def test_snapshot_needs_writable_prefix(tmp_path):
    with pytest.raises(SolverError, match="Cannot write to snapshot prefix"):
        make_solver('base_lr: 0.1 lr_policy: "fixed" snapshot: 5 snapshot_prefix: "%s/no/such/dir/x"'
                    % tmp_path)
    with pytest.raises(SolverError, match="snapshot is specified but snapshot_prefix is not"):
        make_solver('base_lr: 0.1 lr_policy: "fixed" snapshot: 5')
