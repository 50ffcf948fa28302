"""Compiler passes: NetState filtering and Split insertion (Caffe's FilterNet / InsertSplits)."""
import pytest
from google.protobuf import text_format

from caffepy.net import passes as net_passes
from caffepy.errors import NetError
from caffepy.proto import caffe_pb2


def net(text):
    return text_format.Parse(text, caffe_pb2.NetParameter())


def names(p):
    return [l.name for l in p.layer]


FILTER_NET = """
layer { name: "always" type: "Input" top: "x" }
layer { name: "train_only" type: "ReLU" bottom: "x" top: "x" include { phase: TRAIN } }
layer { name: "test_only" type: "ReLU" bottom: "x" top: "x" include { phase: TEST } }
layer { name: "not_test" type: "ReLU" bottom: "x" top: "x" exclude { phase: TEST } }
layer { name: "lvl2" type: "ReLU" bottom: "x" top: "x" include { min_level: 2 } }
layer { name: "lvl_max1" type: "ReLU" bottom: "x" top: "x" include { max_level: 1 } }
layer { name: "stage_a" type: "ReLU" bottom: "x" top: "x" include { stage: "a" } }
layer { name: "stage_ab" type: "ReLU" bottom: "x" top: "x" include { stage: "a" stage: "b" } }
layer { name: "not_a" type: "ReLU" bottom: "x" top: "x" include { not_stage: "a" } }
layer { name: "either" type: "ReLU" bottom: "x" top: "x" include { phase: TEST } include { stage: "b" } }
"""


@pytest.mark.parametrize("phase,level,stages,expected", [
    (caffe_pb2.TRAIN, 0, [], ["always", "train_only", "not_test", "lvl_max1", "not_a"]),
    (caffe_pb2.TEST, 0, [], ["always", "test_only", "lvl_max1", "not_a", "either"]),
    (caffe_pb2.TEST, 2, ["a"], ["always", "test_only", "lvl2", "stage_a", "either"]),
    (caffe_pb2.TRAIN, 1, ["a", "b"], ["always", "train_only", "not_test", "lvl_max1", "stage_a",
                                      "stage_ab", "either"]),
])
def test_filter_net(phase, level, stages, expected):
    p = net(FILTER_NET)
    state = net_passes.make_state(p, phase=phase, level=level, stages=stages)
    assert names(net_passes.filter_net(p, state)) == expected


def test_include_and_exclude_is_an_error():
    p = net('layer { name: "bad" type: "ReLU" include { phase: TRAIN } exclude { phase: TEST } }')
    with pytest.raises(NetError, match="bad"):
        net_passes.filter_net(p, net_passes.make_state(p, phase=caffe_pb2.TRAIN))


def test_insert_splits_fan_out():
    p = net("""
    layer { name: "data" type: "Input" top: "x" }
    layer { name: "a" type: "ReLU" bottom: "x" top: "a" }
    layer { name: "b" type: "ReLU" bottom: "x" top: "b" }
    layer { name: "c" type: "Eltwise" bottom: "a" bottom: "b" top: "c" }
    """)
    s = net_passes.insert_splits(p)
    assert names(s) == ["data", "x_data_0_split", "a", "b", "c"]
    split = s.layer[1]
    assert split.type == "Split" and list(split.bottom) == ["x"]
    assert list(split.top) == ["x_data_0_split_0", "x_data_0_split_1"]
    assert list(s.layer[2].bottom) == ["x_data_0_split_0"]
    assert list(s.layer[3].bottom) == ["x_data_0_split_1"]


def test_insert_splits_loss_weight_counts_as_a_use():
    p = net("""
    layer { name: "data" type: "Input" top: "x" }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" loss_weight: 2 }
    layer { name: "r" type: "ReLU" bottom: "y" top: "z" }
    """)
    s = net_passes.insert_splits(p)
    assert names(s) == ["data", "ip", "y_ip_0_split", "r"]
    assert list(s.layer[1].loss_weight) == []
    assert list(s.layer[2].loss_weight) == [2.0, 0.0]
    assert list(s.layer[3].bottom) == ["y_ip_0_split_1"]


def test_insert_splits_in_place_chain_untouched():
    p = net("""
    layer { name: "data" type: "Input" top: "x" }
    layer { name: "r1" type: "ReLU" bottom: "x" top: "x" }
    layer { name: "r2" type: "ReLU" bottom: "x" top: "x" }
    """)
    assert names(net_passes.insert_splits(p)) == ["data", "r1", "r2"]


def test_unknown_bottom_names_layer_and_blob():
    p = net('layer { name: "r" type: "ReLU" bottom: "nope" top: "y" }')
    with pytest.raises(NetError, match=r"layer 'r' \(ReLU\): unknown bottom blob 'nope'"):
        net_passes.insert_splits(p)


def test_unknown_bottom_in_both_phases_is_a_wiring_error_not_a_crash():
    """A deploy file with an Accuracy on a 'label' no layer makes (in any phase): one line."""
    import pytest
    from caffepy.errors import CaffeError
    from caffepy.net import Net
    text = """input: "data" input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }
    layer { name: "acc" type: "Accuracy" bottom: "ip" bottom: "label" top: "acc" include { phase: TEST } }"""
    with pytest.raises(CaffeError, match="unknown bottom blob 'label'"):
        Net(text, 1)


def test_the_phase_that_produces_a_missing_blob_is_named_though_it_misses_another():
    """TEST reads 'data', which only TRAIN's reader writes; TRAIN's loss also reads 'extra',
    which nothing writes: that is TRAIN's own error, and TEST's names phase TRAIN."""
    p = net('layer { name: "d" type: "Input" top: "data" include { phase: TRAIN } '
            'input_param { shape { dim: 1 } } } '
            'layer { name: "z" type: "Input" top: "zero" input_param { shape { dim: 1 } } } '
            'layer { name: "r" type: "ReLU" bottom: "data" top: "r" } '
            'layer { name: "l" type: "EuclideanLoss" bottom: "r" bottom: "extra" '
            'include { phase: TRAIN } }')
    with pytest.raises(net_passes.PhaseError, match="produced only in phase TRAIN") as e:
        net_passes.filter_net(p, net_passes.make_state(p, phase=caffe_pb2.TEST))
    assert e.value.phase == caffe_pb2.TRAIN
    # when the other phase does not write it before its readers either, no phase is named
    q = net('layer { name: "r" type: "ReLU" bottom: "data" top: "r" } '
            'layer { name: "d" type: "Input" top: "data" include { phase: TRAIN } '
            'input_param { shape { dim: 1 } } }')
    out = net_passes.filter_net(q, net_passes.make_state(q, phase=caffe_pb2.TEST))
    assert [lp.name for lp in out.layer] == ["r"]
