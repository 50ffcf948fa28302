"""Forks' own V1 layer types upgrade to the type strings their forks give them."""
import pytest

from caffepy.errors import ProtoError
from caffepy.layers import base
from caffepy.proto import caffe_pb2, harvest_policy, io, upgrade
from caffepy.proto.v1_fork_types import FORK_V1_TYPES, UNIMPLEMENTED, UNMAPPED

V1 = caffe_pb2.V1LayerParameter
#: the string each declared name upgrades to (the first row of a name, as fork_v1_types keeps)
EXPECTED = {}
for _name, _new, _fork, _where in FORK_V1_TYPES:
    if _name in V1.LayerType.keys():
        EXPECTED.setdefault(_name, _new)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fork_v1_type_upgrades_to_its_type_string(name):
    text = 'layers { name: "l" type: %s bottom: "a" top: "b" }' % name
    with harvest_policy.structure_only():
        net = io.read_net(text)
    assert [l.type for l in net.layer] == [EXPECTED[name]]
    assert not net.layers
    if base.has_layer_type(EXPECTED[name]):
        assert io.read_net(text).layer[0].type == EXPECTED[name]   # strict: accepted
    else:
        with pytest.raises(ProtoError, match="known only from forks"):
            io.read_net(text)


def test_every_row_is_declared_and_described():
    assert all(where in ("upgrade", "class", "factory") for _n, _t, _f, where in FORK_V1_TYPES)
    assert all(t and f for _n, t, f, _w in FORK_V1_TYPES)
    missing = [n for n, *_ in FORK_V1_TYPES if n not in V1.LayerType.keys()]
    assert missing == []


def test_bvlc_and_curated_entries_win():
    assert upgrade.V1_TYPES[V1.RESHAPE] == "Reshape" and upgrade.V1_TYPES[V1.CROP] == "Crop"
    assert upgrade.V1_TYPES[V1.CONVOLUTION] == "Convolution"


def test_a_row_names_agree_across_forks():
    seen = {}
    for name, new, fork, _w in FORK_V1_TYPES:
        assert seen.setdefault(name, new) == new, (name, fork)


@pytest.mark.parametrize("name", [n for names in UNMAPPED.values() for n in names][:3])
def test_unmapped_fork_values_keep_their_enum_name(name):
    with harvest_policy.structure_only():
        net = io.read_net('layers { name: "l" type: %s }' % name)
    assert net.layer[0].type == name


def test_every_type_string_is_computed_or_listed_as_not():
    base.load_all()
    types = {t for _n, t, _f, _w in FORK_V1_TYPES}
    missing = sorted(t for t in types if not base.has_layer_type(t) and t not in UNIMPLEMENTED)
    assert missing == []
    stale = sorted(t for t in UNIMPLEMENTED if base.has_layer_type(t) or t not in types)
    assert stale == []


V1_NET = """name: "v1"
input: "data"
input_dim: 1 input_dim: 3 input_dim: 8 input_dim: 8
input: "rois"
input_dim: 2 input_dim: 5 input_dim: 1 input_dim: 1
layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv"
         convolution_param { num_output: 4 kernel_size: 3
                             weight_filler { type: "gaussian" std: 0.5 } } }
layers { name: "prelu" type: PRELU bottom: "conv" top: "conv"
         prelu_param { channel_shared: true filler { type: "constant" value: 0.3 } } }
layers { name: "roi" type: ROI_POOLING bottom: "conv" bottom: "rois" top: "pool"
         roi_pooling_param { pooled_w: 2 pooled_h: 3 spatial_scale: 0.5 } }
layers { name: "flat" type: RESHAPE bottom: "pool" top: "flat"
         reshape_param { shape { dim: 0 dim: -1 } } }
"""


def test_v1_fork_params_of_caffepy_layers_carry_to_the_current_layer():
    """Forks' V1 layers (Fast R-CNN's ROI_POOLING, PRELU, RESHAPE) keep their params as V1
    fields; the V1 upgrade copies each into the LayerParameter field of its name, so the strict
    reading accepts them and the net computes what the same net written with ``layer`` does."""
    import numpy as np
    from caffepy.net import Net
    for name in ("roi_pooling_param", "prelu_param", "reshape_param"):
        assert "V1LayerParameter." + name in harvest_policy.table()    # known only from forks
    net = io.read_net(V1_NET)                                           # strict: accepted
    by_name = {l.name: l for l in net.layer}
    assert by_name["roi"].type == "ROIPooling"
    assert (by_name["roi"].roi_pooling_param.pooled_w, by_name["roi"].roi_pooling_param.pooled_h,
            by_name["roi"].roi_pooling_param.spatial_scale) == (2, 3, 0.5)
    assert by_name["prelu"].prelu_param.channel_shared
    assert list(by_name["flat"].reshape_param.shape.dim) == [0, -1]

    current = io.read_net(io.to_text(net))                              # the same net, `layer`
    rng = np.random.RandomState(0)
    data = rng.randn(1, 3, 8, 8).astype(np.float32)
    weights = rng.randn(4, 3, 3, 3).astype(np.float32)
    rois = np.array([[0, 0, 0, 11, 11], [0, 2, 4, 9, 7]], np.float32).reshape(2, 5, 1, 1)
    outs = []
    for param in (net, current):
        n = Net(param, phase="TEST")
        n.params["conv"][0].data[...] = weights
        n.blobs["data"].data[...] = data
        n.blobs["rois"].data[...] = rois
        outs.append(n.forward()["flat"].copy())
    assert outs[0].shape == (2, 4 * 2 * 3)
    np.testing.assert_array_equal(outs[0], outs[1])
    prelu = net.layer[[l.name for l in net.layer].index("prelu")]
    assert prelu.prelu_param.filler.value == np.float32(0.3)


def test_v1_fork_field_without_a_computing_counterpart_is_still_refused():
    """A V1 field carried to a LayerParameter field that is itself only a fork's (no caffepy
    layer computes it), and a fork-only field inside a carried message, stay refused."""
    text = 'layers { name: "l" type: CONVOLUTION bottom: "a" top: "b" svm_param { %s} }'
    assert "LayerParameter.svm_param" in harvest_policy.table()
    io.read_net(text % "")                             # an empty message is the default
    with pytest.raises(ProtoError, match="svm_param"):
        io.read_net(text % "svm_c: 2 ")
    inner = V1_NET.replace("spatial_scale: 0.5", "spatial_scale: 0.5 is_multi_interpolate: true")
    with pytest.raises(ProtoError, match="is_multi_interpolate"):
        io.read_net(inner)
