"""Structured Sparsity Learning fields (wenwei202/caffe scnn): one SGD step against numpy.

Each reference below is written from the fork's sgd_solver.cpp / blob.cpp / net.cpp arithmetic
with explicit loops, independently of caffepy.solvers.sparsity.
"""
import numpy as np
import pytest

import caffepy
from caffepy.errors import CaffeError, ProtoError
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.solvers import get_solver



def f32(x):
    """A float field's value as the solver reads it (proto floats are single precision)."""
    return float(np.float32(x))


LR, WD = f32(0.1), f32(0.01)
THR = 1e-4


def net_text(conv_extra="", conv_params="", ip_extra="", ip_params=""):
    return """
name: "ssl"
layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 2 dim: 4 dim: 3 dim: 3 } } }
layer { name: "y" type: "Input" top: "y" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "conv" type: "Convolution" bottom: "x" top: "conv" %s %s
        convolution_param { num_output: 4 kernel_size: 2 group: 2
                            weight_filler { type: "gaussian" std: 0.5 }
                            bias_filler { type: "constant" value: 0.2 } } }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip" %s %s
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "constant" value: 0.1 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "y" top: "loss" }
""" % (conv_extra, conv_params, ip_extra, ip_params)


def make(net, solver_extra=""):
    text = ('net_param { %s }\nbase_lr: %g lr_policy: "fixed" weight_decay: %g random_seed: 5\n%s'
            % (net, LR, WD, solver_extra))
    return get_solver(text, dtype=np.float64)


def gradients(solver, seed=0):
    """Fill the inputs, run forward/backward; the raw diffs and data of every learnable param."""
    rng = np.random.default_rng(seed)
    solver.net.blobs["x"].data[...] = rng.standard_normal((2, 4, 3, 3))
    solver.net.blobs["y"].data[...] = rng.standard_normal((2, 3))
    solver.net.clear_param_diffs()
    solver.net.forward_backward()
    params = solver.net.learnable_params
    return [p.diff.copy() for p in params], [p.data.copy() for p in params]


def zerout(w):
    w = w.copy()
    w[(w < THR) & (w > -THR)] = 0
    return w


def check_step(solver, expected_steps, data):
    """apply_update; each param must become zerout(w - lr * step)."""
    solver.apply_update()
    for pid, (p, step, w) in enumerate(zip(solver.net.learnable_params, expected_steps, data)):
        np.testing.assert_allclose(p.data, zerout(w - LR * step), rtol=1e-10, atol=1e-12,
                                   err_msg="param %d" % pid)


def test_per_param_l1_overrides_the_solvers_l2():
    s = make(net_text(conv_params='param { regularization_type: "L1" } param { }',
                      ip_params='param { } param { regularization_type: "L1" decay_mult: 3 }'))
    g, w = gradients(s)
    w[0].flat[0] = 0.0                      # sign(0) = 0: no L1 push on an exact zero
    s.net.learnable_params[0].data.flat[0] = 0.0
    decay = [WD, WD, WD, 3 * WD]
    l1 = [True, False, False, True]
    steps = [gi + d * (np.sign(wi) if is_l1 else wi) for gi, wi, d, is_l1 in zip(g, w, decay, l1)]
    check_step(s, steps, w)


def test_solver_l1_with_a_param_back_to_l2():
    s = make(net_text(ip_params='param { regularization_type: "L2" }'),
             'regularization_type: "L1"')
    g, w = gradients(s)
    steps = [g[0] + WD * np.sign(w[0]), g[1] + WD * np.sign(w[1]),
             g[2] + WD * w[2], g[3] + WD * np.sign(w[3])]
    check_step(s, steps, w)


def breadth_reference(w, decay):
    """decay * w / ||row||: one group per filter (row of the filters x (C*kh*kw) matrix)."""
    mat = w.reshape(w.shape[0], -1)
    out = np.zeros_like(mat)
    for r in range(mat.shape[0]):
        n = np.sqrt(sum(v * v for v in mat[r]))
        if n:
            out[r] = decay * mat[r] / n
    return out.reshape(w.shape)


def kernel_shape_reference(w, decay, groups):
    """decay * w / ||column within its filter group||."""
    mat = w.reshape(w.shape[0], -1)
    rows = mat.shape[0] // groups
    out = np.zeros_like(mat)
    for g in range(groups):
        for c in range(mat.shape[1]):
            col = mat[g * rows:(g + 1) * rows, c]
            n = np.sqrt(sum(v * v for v in col))
            if n:
                out[g * rows:(g + 1) * rows, c] = decay * col / n
    return out.reshape(w.shape)


def test_breadth_group_lasso_over_filters():
    s = make(net_text(conv_params="param { breadth_decay_mult: 2 } param { decay_mult: 0 }",
                      ip_params="param { breadth_decay_mult: 0.5 }"), "breadth_decay: 0.05")
    g, w = gradients(s)
    w[0][1] = 0.0                            # an all-zero filter: no division by zero
    s.net.learnable_params[0].data[1] = 0.0
    steps = [g[0] + WD * w[0] + breadth_reference(w[0], f32(0.05) * 2), g[1],
             g[2] + WD * w[2] + breadth_reference(w[2], f32(0.05) * 0.5), g[3] + WD * w[3]]
    check_step(s, steps, w)
    assert np.isfinite(s.net.learnable_params[0].data).all()


def test_kernel_shape_group_lasso_per_filter_group():
    s = make(net_text(conv_params="param { kernel_shape_decay_mult: 0.5 breadth_decay_mult: 1 }"),
             "kernel_shape_decay: 0.2 breadth_decay: 0.03")
    g, w = gradients(s)
    w[0][0:2, 1, 0, 1] = 0.0                 # a zero column of the first filter group
    s.net.learnable_params[0].data[0:2, 1, 0, 1] = 0.0
    conv = (g[0] + WD * w[0] + kernel_shape_reference(w[0], f32(0.2) * 0.5, 2)
            + breadth_reference(w[0], f32(0.03)))
    check_step(s, [conv, g[1] + WD * w[1], g[2] + WD * w[2], g[3] + WD * w[3]], w)


def block_reference(w, decay, ydimen, xdimen):
    """decay * w / ||block|| over blocks of ydimen rows x xdimen columns."""
    mat = w.reshape(w.shape[0], -1)
    out = np.zeros_like(mat)
    for r0 in range(0, mat.shape[0], ydimen):
        for c0 in range(0, mat.shape[1], xdimen):
            blk = mat[r0:r0 + ydimen, c0:c0 + xdimen]
            n = np.sqrt((blk * blk).sum())
            if n:
                out[r0:r0 + ydimen, c0:c0 + xdimen] = decay * blk / n
    return out.reshape(w.shape)


def test_block_group_lasso():
    s = make(net_text(ip_params="param { block_group_lasso { xdimen: 4 ydimen: 1 } "
                                "block_group_lasso { xdimen: 2 ydimen: 3 block_decay_mult: 2 } }"),
             "block_group_decay: 0.04")
    g, w = gradients(s)
    w[2][:, 0:2] = 0.0                       # an all-zero 3x2 block
    s.net.learnable_params[2].data[:, 0:2] = 0.0
    ip = (g[2] + WD * w[2] + block_reference(w[2], f32(0.04), 1, 4)
          + block_reference(w[2], 2 * f32(0.04), 3, 2))
    check_step(s, [g[0] + WD * w[0], g[1] + WD * w[1], ip, g[3] + WD * w[3]], w)


def test_block_that_does_not_divide_is_one_line():
    with pytest.raises(CaffeError) as e:
        make(net_text(ip_params="param { block_group_lasso { xdimen: 5 ydimen: 1 } }"),
             "block_group_decay: 0.04")
    assert "\n" not in str(e.value) and "xdimen 5" in str(e.value)


def test_group_lasso_term_is_logged_at_display():
    from tests.solvers.helpers import capture_log, reset_log
    s = make(net_text(conv_params="param { breadth_decay_mult: 1 }"), "breadth_decay: 0.1 display: 1")
    g, w = gradients(s)
    stream = capture_log()
    try:
        s.apply_update()
    finally:
        reset_log()
    rows = np.sqrt((w[0].reshape(4, -1) ** 2).sum(axis=1)).sum()
    l2 = sum(WD / 2 * float((wi ** 2).sum()) for wi in w)
    line = [x for x in stream.getvalue().splitlines() if "Total regularization terms" in x]
    assert line and abs(float(line[0].split("terms: ")[1].split()[0]) - (l2 + f32(0.1) * rows)) < 1e-4


def save_weights(tmp_path, net, edit):
    s = make(net)
    edit(s.net)
    path = str(tmp_path / "ssl.caffemodel")
    s.net.save(path)
    return path


def test_connectivity_masks_keep_disconnected_weights_zero(tmp_path):
    net = net_text(conv_extra="connectivity_mode: DISCONNECTED_GRPWISE",
                   ip_extra="connectivity_mode: DISCONNECTED_ELTWISE")

    def edit(n):
        conv, ip = n.params["conv"][0].data, n.params["ip"][0].data
        conv[0] = 0.0                        # an all-zero filter (group 1)
        conv[2:4, 0, 1, 1] = 0.0             # an all-zero column of group 2
        conv[3, 1, 0, 0] = 0.0               # a lone zero: GRPWISE leaves it connected
        conv[2, 0, 1, 0] = 5e-5              # under the threshold: zeroed on load, still connected
        ip[0, 3] = 0.0
        ip[1, 5] = -3e-5                     # zeroed on load and disconnected (ELTWISE)

    path = save_weights(tmp_path, net, edit)
    s = make(net)
    s.net.copy_from(path)
    conv, ip = s.net.params["conv"][0].data, s.net.params["ip"][0].data
    assert conv[2, 0, 1, 0] == 0 and ip[1, 5] == 0
    mask_conv = np.ones((4, 2, 2, 2))
    mask_conv[0] = 0
    mask_conv[2:4, 0, 1, 1] = 0
    mask_ip = (ip != 0).astype(float)
    assert mask_ip.sum() == ip.size - 2
    g, w = gradients(s, seed=3)
    steps = [(g[0] + WD * w[0]) * mask_conv, g[1] + WD * w[1],
             (g[2] + WD * w[2]) * mask_ip, g[3] + WD * w[3]]
    check_step(s, steps, w)
    for _ in range(3):
        gradients(s, seed=4)
        s.apply_update()
    conv, ip = s.net.params["conv"][0].data, s.net.params["ip"][0].data
    assert not conv[0].any() and not conv[2:4, 0, 1, 1].any()
    assert not ip[0, 3] and not ip[1, 5]
    assert conv[3, 1, 0, 0] != 0 and conv[2, 0, 1, 0] != 0     # connected zeros move


def test_without_ssl_fields_nothing_changes():
    s = make(net_text())
    assert s.sparsity is None
    g, w = gradients(s)
    s.net.learnable_params[2].data.flat[0] = 5e-5
    w[2].flat[0] = 5e-5
    s.apply_update()
    expect = w[2] - LR * (g[2] + WD * w[2])
    np.testing.assert_allclose(s.net.learnable_params[2].data, expect, rtol=1e-12)
    assert s.net.learnable_params[2].data.flat[0] != 0


SMALL = """
name: "ssl_parse"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 2 dim: 4 dim: 4 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  connectivity_mode: DISCONNECTED_ELTWISE
  param { lr_mult: 1 decay_mult: 1 breadth_decay_mult: 1.0 kernel_shape_decay_mult: 0.5
          regularization_type: "L1" }
  param { lr_mult: 2 decay_mult: 0 block_group_lasso { xdimen: 1 ydimen: 3 block_decay_mult: 2 } }
  convolution_param { num_output: 3 kernel_size: 3 } }
layer { name: "fc" type: "InnerProduct" bottom: "conv1" top: "fc"
  connectivity_mode: DISCONNECTED_GRPWISE param { regularization_type: "L2" }
  inner_product_param { num_output: 2 } }
"""


def test_parse_small_prototxt_strict():
    msg = caffe_pb2.NetParameter()
    proto_io.parse_text(SMALL, msg, filename="ssl.prototxt", strict=True)
    conv, fc = msg.layer[1], msg.layer[2]
    assert conv.connectivity_mode == caffe_pb2.LayerParameter.DISCONNECTED_ELTWISE
    assert fc.connectivity_mode == caffe_pb2.LayerParameter.DISCONNECTED_GRPWISE
    assert conv.param[0].breadth_decay_mult == 1.0
    assert conv.param[0].kernel_shape_decay_mult == 0.5
    assert list(conv.param[0].regularization_type) == ["L1"]
    sp = caffe_pb2.SolverParameter()
    proto_io.parse_text("breadth_decay: 0.001 kernel_shape_decay: 0.002 block_group_decay: 0.1",
                        sp, filename="solver.prototxt", strict=True)
    assert abs(sp.breadth_decay - 0.001) < 1e-9 and abs(sp.kernel_shape_decay - 0.002) < 1e-9
    assert conv.param[1].block_group_lasso[0].ydimen == 3
    net = caffepy.Net(SMALL, caffepy.TEST)
    assert net.blobs["fc"].data.shape == (1, 2)


def test_unknown_local_regularization_type_is_one_line():
    with pytest.raises(CaffeError) as e:
        make(net_text(ip_params='param { regularization_type: "L1_DNS" }'))
    msg = str(e.value)
    assert "\n" not in msg and "layer 'ip'" in msg and "L1_DNS" in msg


def test_shared_param_mismatch_is_refused():
    shared = net_text(conv_params='param { name: "cw" breadth_decay_mult: 1 }')
    shared = shared.replace('layer { name: "loss"', """
layer { name: "conv2" type: "Convolution" bottom: "x" top: "conv2"
        param { name: "cw" breadth_decay_mult: 2 }
        convolution_param { num_output: 4 kernel_size: 2 group: 2 } }
layer { name: "silence" type: "Silence" bottom: "conv2" }
layer { name: "loss\"""")
    with pytest.raises(CaffeError) as e:
        make(shared, "breadth_decay: 0.1")
    assert "mismatched breadth_decay_mult" in str(e.value)


def test_strict_parse_without_ssl_harvest_error():
    msg = caffe_pb2.NetParameter()
    with pytest.raises(ProtoError):
        proto_io.parse_text(SMALL.replace("connectivity_mode: DISCONNECTED_ELTWISE",
                                          "connectivity_mode: NOT_A_MODE"),
                            msg, filename="ssl.prototxt", strict=True)


def test_distributed_training_refuses_the_fields():
    from caffepy.dist.trainer import train
    s = make(net_text(conv_params="param { breadth_decay_mult: 1 }"), "breadth_decay: 0.1")
    with pytest.raises(CaffeError) as e:
        train(s, cluster=caffe_pb2.ClusterParameter())
    assert "Structured Sparsity Learning" in str(e.value) and "\n" not in str(e.value)
