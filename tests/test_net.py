"""Net: wiring, in-place layers, shared params, need-backward analysis, outputs, weights I/O."""
import numpy as np
import pytest

import caffepy
from caffepy.errors import NetError, ShapeError
from caffepy.net import Net

MLP = """
name: "mlp"
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 4 dim: 3 } shape { dim: 4 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
layer { name: "acc" type: "Accuracy" bottom: "ip2" bottom: "label" top: "acc" include { phase: TEST } }
"""


def build(text=MLP, phase=caffepy.TRAIN, **kw):
    caffepy.set_random_seed(3)
    return Net(text, phase, dtype=np.float64, **kw)


def feed(net, seed=0):
    rng = np.random.default_rng(seed)
    net.blobs["data"].data[...] = rng.standard_normal(net.blobs["data"].shape)
    net.blobs["label"].data[...] = rng.integers(0, 3, net.blobs["label"].shape)


def test_structure_train_and_test():
    net = build()
    assert net._layer_names == ["data", "label_data_1_split", "ip1", "relu1", "ip2", "loss"] or \
        net._layer_names == ["data", "ip1", "relu1", "ip2", "loss"]
    assert net.inputs == ["data", "label"]
    assert net.outputs == ["loss"]
    assert list(net.params) == ["ip1", "ip2"]
    assert [p.shape for p in net.params["ip1"]] == [(5, 3), (5,)]
    assert {k: v for k, v in net.blob_loss_weights.items() if v} == {"loss": 1.0}
    assert set(net.blob_loss_weights) == set(net.blobs)
    test = build(phase=caffepy.TEST)
    assert sorted(test.outputs) == ["acc", "loss"]
    assert "ip2_ip2_0_split" in test._layer_names  # ip2 feeds loss and accuracy


def test_in_place_relu_shares_blob():
    net = build()
    i = net._layer_names.index("relu1")
    assert net.top_vecs[i][0] is net.bottom_vecs[i][0] is net.blobs["ip1"]


def test_forward_backward_matches_numeric_gradient():
    net = build()
    feed(net)
    loss = net.forward_backward()
    assert np.isfinite(loss) and loss > 0
    w = net.params["ip1"][0]
    analytic = w.diff.copy()
    h = 1e-6
    for idx in [(0, 0), (2, 1), (4, 2)]:
        old = w.data[idx]
        w.data[idx] = old + h
        lp = net.forward_from_to()
        w.data[idx] = old - h
        lm = net.forward_from_to()
        w.data[idx] = old
        assert abs((lp - lm) / (2 * h) - analytic[idx]) < 1e-6


def test_param_diffs_accumulate_and_clear():
    net = build()
    feed(net)
    net.forward_backward()
    once = net.params["ip2"][0].diff.copy()
    net.forward_backward()
    np.testing.assert_allclose(net.params["ip2"][0].diff, 2 * once)
    net.clear_param_diffs()
    assert not net.params["ip2"][0].diff.any()


def test_need_backward_analysis_and_propagate_down():
    net = build()
    li = net._layer_names.index("loss")
    assert net.bottom_need_backward[li] == [True, False]        # label gets no gradient
    assert net.layer_need_backward[net._layer_names.index("ip1")]
    # frozen first layer: no gradient into data, no layer backward needed for ip1
    frozen = MLP.replace('bottom: "data" top: "ip1"', 'bottom: "data" top: "ip1" param { lr_mult: 0 } '
                                                     'param { lr_mult: 0 }')
    net = build(frozen)
    assert not net.layer_need_backward[net._layer_names.index("ip1")]
    pd = MLP.replace('bottom: "ip1" top: "ip2"', 'bottom: "ip1" top: "ip2" propagate_down: false')
    net = build(pd)
    assert net.bottom_need_backward[net._layer_names.index("ip2")] == [False]
    assert not net.layer_need_backward[net._layer_names.index("relu1")]


def test_force_backward_gives_input_diffs():
    net = build("force_backward: true\n" + MLP)
    feed(net)
    net.forward()
    diffs = net.backward()
    assert set(diffs) == {"data", "label"}
    assert np.abs(diffs["data"]).sum() > 0
    assert not diffs["label"].any()                     # Softmax loss never propagates to labels


def test_no_loss_means_no_backward():
    text = MLP.split('layer { name: "loss"')[0]
    net = build(text)
    assert net.outputs == ["ip2", "label"] and not any(net.layer_need_backward)


def test_shared_params_by_name():
    text = """
    layer { name: "data" type: "Input" top: "a" top: "b" input_param { shape { dim: 2 dim: 3 } } }
    layer { name: "ipa" type: "InnerProduct" bottom: "a" top: "ya" param { name: "w" } param { name: "bias" }
            inner_product_param { num_output: 2 weight_filler { type: "gaussian" } } }
    layer { name: "ipb" type: "InnerProduct" bottom: "b" top: "yb" param { name: "w" } param { name: "bias" }
            inner_product_param { num_output: 2 } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "ya" bottom: "yb" top: "loss" }
    """
    net = build(text)
    assert len(net.learnable_params) == 2
    wa, wb = net.params["ipa"][0], net.params["ipb"][0]
    assert np.shares_memory(wa.data, wb.data) and np.shares_memory(wa.diff, wb.diff)
    bad = text.replace("inner_product_param { num_output: 2 } }", "inner_product_param { num_output: 3 } }")
    with pytest.raises(ShapeError, match="cannot share param 'w'"):
        build(bad)


def test_loss_weight_on_non_loss_layer():
    text = """
    layer { name: "data" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
    layer { name: "r" type: "ReLU" bottom: "x" top: "y" loss_weight: 0.5 }
    """
    net = build(text)
    net.blobs["x"].data[...] = [[1, -2, 3], [4, 5, -6]]
    loss = net.forward_from_to()
    assert loss == pytest.approx(0.5 * (1 + 3 + 4 + 5))


def test_reshape_propagates():
    net = build()
    net.blobs["data"].reshape(7, 3)
    net.blobs["label"].reshape(7)
    net.reshape()
    assert net.blobs["ip2"].shape == (7, 3)


def test_pycaffe_forward_checks_inputs():
    net = build()
    with pytest.raises(NetError, match="do not match net inputs"):
        net.forward(data=np.zeros((4, 3)))
    with pytest.raises(ShapeError, match="not batch sized"):
        net.forward(data=np.zeros((5, 3)), label=np.zeros(5))
    out = net.forward(data=np.ones((4, 3)), label=np.zeros(4))
    assert set(out) == {"loss"}


def test_unknown_bottom_and_duplicate_top_errors():
    with pytest.raises(NetError, match="unknown bottom blob 'nope'"):
        build('layer { name: "r" type: "ReLU" bottom: "nope" top: "y" }')
    with pytest.raises(NetError, match="produced by multiple sources"):
        build('layer { name: "d" type: "Input" top: "x" input_param { shape { dim: 1 } } }\n'
              'layer { name: "d2" type: "Input" top: "x" input_param { shape { dim: 1 } } }')


def test_in_place_layer_must_keep_its_blobs_size():
    x = 'layer { name: "d" type: "Input" top: "x" input_param { shape { dim: 1 dim: 8 } } }\n'
    with pytest.raises(NetError, match="'ip' .* works in place on blob 'x' but changes its shape "
                                       r"from \(1, 8\) to \(1, 3\)"):
        build(x + 'layer { name: "ip" type: "InnerProduct" bottom: "x" top: "x" '
                  'inner_product_param { num_output: 3 } }')
    net = build(x + 'layer { name: "r" type: "Reshape" bottom: "x" top: "x" '
                    'reshape_param { shape { dim: 2 dim: 4 } } }\n'
                    'layer { name: "relu" type: "ReLU" bottom: "x" top: "x" }')
    assert net.blobs["x"].shape == (2, 4)            # same size, new shape: as in Caffe


def test_unknown_type_names_closest(tmp_path):
    with pytest.raises(NetError, match="unknown layer type 'Relu'.*did you mean 'ReLU'"):
        build('layer { name: "d" type: "Input" top: "x" input_param { shape { dim: 1 } } }\n'
              'layer { name: "r" type: "Relu" bottom: "x" top: "y" }')


def test_caffemodel_round_trip_bit_identical(tmp_path):
    net = build()
    path = tmp_path / "w.caffemodel"
    net.save(str(path))
    other = Net(MLP, caffepy.TRAIN, dtype=np.float64)
    other.copy_from(str(path))
    for name in net.params:
        for a, b in zip(net.params[name], other.params[name]):
            np.testing.assert_array_equal(a.data.astype(np.float32), b.data)
    path2 = tmp_path / "w2.caffemodel"
    other.save(str(path2))
    assert path.read_bytes() == path2.read_bytes()


def test_copy_from_shape_mismatch_message(tmp_path):
    net = build()
    path = tmp_path / "w.caffemodel"
    net.save(str(path))
    other = build(MLP.replace("num_output: 5", "num_output: 6"))
    with pytest.raises(ShapeError, match=r"Cannot copy param 0 weights from layer 'ip1'; shape mismatch.  "
                                         r"Source param shape is 5 3 \(15\); target param shape is 6 3 \(18\)"):
        other.copy_from(str(path))


def test_legacy_4d_blobs_load_into_2d_params():
    from caffepy.proto import caffe_pb2
    net = build()
    src = net.to_proto()
    for lp in src.layer:
        for bp in lp.blobs:
            shape = list(bp.shape.dim)
            bp.ClearField("shape")
            legacy = [1] * (4 - len(shape)) + shape
            bp.num, bp.channels, bp.height, bp.width = legacy
    other = Net(MLP, caffepy.TRAIN, dtype=np.float64)
    other.copy_trained_layers_from(src)
    np.testing.assert_allclose(other.params["ip1"][0].data, net.params["ip1"][0].data, rtol=1e-6)


def test_hdf5_round_trip(tmp_path):
    pytest.importorskip("h5py")
    net = build()
    net.save_hdf5(str(tmp_path / "w.h5"))
    other = Net(MLP, caffepy.TRAIN, dtype=np.float64)
    other.load_hdf5(str(tmp_path / "w.h5"))
    np.testing.assert_array_equal(other.params["ip2"][0].data, net.params["ip2"][0].data)


def test_legacy_constructor_order(tmp_path):
    net = build()
    path = str(tmp_path / "w.caffemodel")
    net.save(path)
    legacy = Net(MLP, path, caffepy.TEST)
    assert legacy.phase == caffepy.TEST
    np.testing.assert_allclose(legacy.params["ip1"][0].data, net.params["ip1"][0].data, rtol=1e-6)


def test_build_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.prototxt"
    path.write_text('layer { name: "d" type: "Input" top: "x" input_param { shape { dim: 1 } } }\n'
                    'layer {\n  name: "r"\n  type: "ReLU"\n  bottom: "z"\n  top: "y"\n}\n')
    with pytest.raises(NetError, match=r"bad.prototxt:3: layer 'r' \(ReLU\): unknown bottom blob 'z'"):
        Net(str(path), caffepy.TEST)


def test_cli_prints_one_line_for_user_errors(tmp_path, capsys):
    from caffepy.cli import main
    path = tmp_path / "bad.prototxt"
    path.write_text('layer { name: "c" type: "Convolution" convolution_param { num_ouput: 3 } }\n')
    for argv in (["summary", "--strict", str(path)], ["time", "--model", str(path)]):
        assert main(argv) == 1
        err = [ln for ln in capsys.readouterr().err.strip().splitlines()
               if not ln.startswith("I")]          # time logs "Use CPU." first, as Caffe does
        assert len(err) == 1 and 'bad.prototxt:1:' in err[0] and 'num_ouput' in err[0]


def test_an_error_names_the_line_of_the_layer_of_the_phase_built(tmp_path):
    """TRAIN and TEST layers often share a name: the error's file:line is the one built."""
    from caffepy.net import Net
    text = ('input: "x" input_shape { dim: 2 dim: 3 }\n'
            'layer { name: "ip" type: "InnerProduct" bottom: "%s" top: "y"\n'
            '        include { phase: TRAIN } inner_product_param { num_output: 2 } }\n'
            'layer { name: "ip" type: "InnerProduct" bottom: "%s" top: "y"\n'
            '        include { phase: TEST } inner_product_param { num_output: 2 } }\n')
    path = tmp_path / "net.prototxt"
    path.write_text(text % ("x", "nope"))
    with pytest.raises(NetError, match=r"net\.prototxt:4: layer 'ip'.*'nope'"):
        Net(str(path), phase=1)
    path.write_text(text % ("gone", "x"))
    with pytest.raises(NetError, match=r"net\.prototxt:2: layer 'ip'.*'gone'"):
        Net(str(path), phase=0)
