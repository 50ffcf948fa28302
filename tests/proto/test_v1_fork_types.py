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
