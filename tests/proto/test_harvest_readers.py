"""A harvested fork field that a caffepy layer reads is one strict mode accepts.

Strict mode refuses every field known only from forks unless
:data:`caffepy.proto.harvest_computed.COMPUTED` lists it, so a fork layer whose field is missing
from that list is built by nothing but ``--ignore-unknown-fields``. The scan below reads the
layer sources: every ``x_param`` accessor a layer reads (``layer_param.x_param`` or
``fork_param(layer_param, "x_param")``) and every field read off a variable bound to one; a
harvested one must be computed, or named here with the reason the layer does not compute it.
"""
import os
import re

import numpy as np
import pytest

from caffepy import cli
from caffepy.proto import caffe_pb2, harvest_policy
from caffepy.proto.harvest_computed import COMPUTED
from caffepy.testing import make_blobs, make_layer, run_layer
from tests.conftest import ROOT

#: harvested fields a layer source reads that it does not compute, and why
NOT_COMPUTED = {
    "TransformationParameter.center_crop": "the landmark data layer refuses it",
    "ImageDataParameter.face_transform": "the multi-label image layer refuses it",
    "PoolingParameter.dilation": "read for drawing and the V1 crop upgrade; pooling refuses it",
    "DiceCoefLossParameter.weights": "DiceCoefLoss refuses the weighted modes",
    "DiceCoefLossParameter.contour_shape": "DiceCoefLoss refuses the weighted modes",
    # the scan's false matches: a name bound to two accessors at once, another message's field
    "VideoDataParameter.fix_crop": "transform_param's field, bound in the same tuple",
    "VideoDataParameter.more_fix_crop": "transform_param's field, bound in the same tuple",
    "VideoDataParameter.multi_scale": "transform_param's field, bound in the same tuple",
    "VideoDataParameter.max_distort": "transform_param's field, bound in the same tuple",
    "VideoDataParameter.scale_ratios": "transform_param's field, bound in the same tuple",
    "EltwiseParameter.axis": "reduction_param's axis in the same module",
    "BNParameter.across_spatial": "norm_param's field in the same module",
}


def _sources():
    out = {}
    for root, _, files in os.walk(os.path.join(ROOT, "caffepy")):
        for name in files:
            if name.endswith(".py") and name != "caffe_pb2.py":
                with open(os.path.join(root, name)) as f:
                    out[os.path.relpath(os.path.join(root, name), ROOT)] = f.read()
    return out


def _accessors():
    """{message name: [LayerParameter fields of that type]}."""
    out = {}
    for fd in caffe_pb2.LayerParameter.DESCRIPTOR.fields:
        if fd.message_type is not None:
            out.setdefault(fd.message_type.name, []).append(fd.name)
    return out


_BIND = (r"(\w+)\s*=\s*(?:self\.)?(?:layer_param|lp|param|layer)\.(\w+_param)\b",
         r"(\w+)\s*=\s*fork_param\([^,()]+,\s*['\"](\w+)['\"]",
         r"(\w+), \w+\s*=\s*(?:self\.)?(?:layer_param|lp)\.(\w+_param)\b,")


def _field_reads(text):
    """{(accessor, field)} that ``text`` reads: ``.x_param.f``, ``.x_param.HasField("f")``, and
    ``p.f`` / ``p.HasField("f")`` / ``getattr(p, "f")`` for ``p`` bound to an accessor."""
    reads = set(re.findall(r"\.(\w+_param)\.(?:HasField\(['\"])?(\w+)", text))
    bound = {}
    for pattern in _BIND:
        for name, accessor in re.findall(pattern, text):
            bound.setdefault(name, set()).add(accessor)
    for name, accessors in bound.items():
        fields = set(re.findall(r"\b%s\.(?:HasField\(['\"])?(\w+)" % name, text))
        fields |= set(re.findall(r"getattr\(%s,\s*['\"](\w+)['\"]" % name, text))
        reads |= {(a, f) for a in accessors for f in fields}
    return reads


def test_every_harvested_param_accessor_a_layer_reads_is_computed():
    table = harvest_policy.table()
    read = set()
    for text in _sources().values():
        read |= set(re.findall(r"fork_param\([^,()]+,\s*['\"](\w+)['\"]", text))
        read |= set(re.findall(r"layer_param\.(\w+_param)\b", text))
    missing = sorted("LayerParameter." + a for a in read
                     if "LayerParameter." + a in table and "LayerParameter." + a not in COMPUTED)
    assert not missing, missing


@pytest.mark.slow
def test_every_harvested_field_a_layer_reads_is_computed_or_named_as_refused():
    table, accessors = harvest_policy.table(), _accessors()
    reads = {}
    for path, text in _sources().items():
        for pair in _field_reads(text):
            reads.setdefault(pair, []).append(path)
    found = {}
    for key in table:
        message, _, field = key.partition(".")
        if key in COMPUTED or "=" in key or message.endswith("LayerParameter"):
            continue
        where = [p for a in accessors.get(message, ()) for p in reads.get((a, field), ())]
        if where:
            found[key] = where
    unexplained = {k: v for k, v in found.items() if k not in NOT_COMPUTED}
    assert not unexplained, unexplained
    stale = set(NOT_COMPUTED) - set(found)
    assert not stale, "no longer read: %s" % sorted(stale)


NETS = {
    # happynear/caffe-windows' EltwiseAffine with one slope and bias for every channel
    "eltwise_affine": """
input: "data" input_shape { dim: 2 dim: 3 dim: 4 dim: 4 }
layer { name: "ea" type: "EltwiseAffine" bottom: "data" top: "ea"
  eltwise_affine_param { channel_shared: true slope_filler { type: "constant" value: 2 }
                         bias_filler { type: "constant" value: 0.5 } } }""",
    # gklz1982/caffe-yolov2's one-bottom DetectionOutput
    "yolov2_detection_output": """
input: "data" input_shape { dim: 1 dim: 125 dim: 13 dim: 13 }
layer { name: "det" type: "DetectionOutput" bottom: "data" top: "det"
  detection_output_param { num_classes: 20 side: 13 num_box: 5 nms_threshold: 0.4
    confidence_threshold: 0.2 label_map_file: "labels.txt"
    biases: 1.08 biases: 1.19 biases: 3.42 biases: 4.41 biases: 6.63
    biases: 11.38 biases: 9.42 biases: 5.11 biases: 16.62 biases: 10.52 } }""",
    # Cysu/dgd_person_reid's GuidedDropout
    "guided_dropout": """
input: "data" input_shape { dim: 2 dim: 3 }
input: "g" input_shape { dim: 2 dim: 3 }
layer { name: "d" type: "GuidedDropout" bottom: "data" bottom: "g" top: "d"
  guided_dropout_param { type: "stochastic" sigmoid_scaler: 2 guidance_threshold: 0.1 } }""",
    # the caffe-windows forks' Resize in a current layer block
    "resize": """
input: "data" input_shape { dim: 1 dim: 3 dim: 4 dim: 4 }
layer { name: "r" type: "Resize" bottom: "data" top: "r" resize_param { height: 8 width: 6 } }""",
}


@pytest.mark.parametrize("name", sorted(NETS))
def test_strict_summary_builds_the_fork_layers_with_their_fields(name, tmp_path):
    path = tmp_path / ("%s.prototxt" % name)
    path.write_text('name: "%s"\n%s\n' % (name, NETS[name]))
    assert cli.main(["summary", str(path), "--strict"]) == 0


def test_a_channel_shared_eltwise_affine_scales_by_its_one_slope():
    layer = make_layer("""type: "EltwiseAffine" eltwise_affine_param { channel_shared: true
        slope_filler { type: "constant" value: 2 } bias_filler { type: "constant" value: 0.5 } }""")
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert layer.blobs[0].shape == () and layer.blobs[1].shape == ()
    np.testing.assert_allclose(y, 2 * x + 0.5, rtol=1e-12)


@pytest.mark.parametrize("field", ["interp_mode: NEAREST", "resize_mode: FIT_SMALL_SIZE",
                                   "zoom: 2"])
def test_resize_refuses_the_resize_fields_it_does_not_read(field):
    from caffepy.errors import NetError
    layer = make_layer('type: "Resize" resize_param { height: 4 width: 4 %s }' % field)
    with pytest.raises(NetError, match="not read by the caffe-windows forks' Resize"):
        run_layer(layer, make_blobs([np.ones((1, 1, 2, 2))]), make_blobs(1))


#: fields the additions declare that change no value (threads, device sharing, record ids, a
#: reshape hint), accepted whatever they hold
NO_VALUE = {"DataParameter.disk_reader_threads", "ImageDataParameter.dataset_share_per_node",
            "LayerParameter.reshape_every_iter", "BlobProto.raw_diff_type", "Datum.record_id",
            "AnnotatedDatum.record_id"}
#: fields read under names built at run time (caffepy/layers/data_memory.py: dementrock/caffe's
#: channels1 .. width4 of a MemoryData layer with up to five tops)
READ_BY_PATTERN = {"MemoryDataParameter.%s%d" % (f, i) for f in ("channels", "height", "width")
                   for i in range(1, 5)}


@pytest.mark.slow
def test_every_field_of_the_schema_additions_is_read_refused_or_changes_nothing():
    import glob
    import json
    from caffepy.proto.own_not_computed import OWN_NOT_COMPUTED
    text = "\n".join(t for p, t in _sources().items() if not p.endswith("own_not_computed.py"))
    unread = []
    for path in sorted(glob.glob(os.path.join(ROOT, "proto", "additions.d", "*.json"))):
        with open(path) as f:
            fields = json.load(f).get("fields", {})
        for message, declared in fields.items():
            for field in declared:
                key = "%s.%s" % (message, field["name"])
                if not re.search(r"\b%s\b" % re.escape(field["name"]), text) \
                        and key not in OWN_NOT_COMPUTED and key not in NO_VALUE \
                        and key not in READ_BY_PATTERN:
                    unread.append(key)
    assert not unread, unread


def test_an_own_schema_field_nothing_computes_is_refused_when_strict():
    from caffepy.errors import ProtoError
    from caffepy.proto.io import read_solver
    with pytest.raises(ProtoError, match="'larc' of SolverParameter .*NVIDIA/caffe"):
        read_solver('net: "n.prototxt" base_lr: 0.1 larc: true', strict=True)
    assert not read_solver('net: "n.prototxt" base_lr: 0.1 larc: false', strict=True).larc


def test_unread_fields_names_what_a_reader_would_ignore():
    """harvest_policy.unread_fields, the check of the readers of a parameter message several forks
    share: a field outside ``read`` counts when set to a value other than its default; a message
    whose fields are all at their defaults does not; a repeated field with elements does."""
    lp = caffe_pb2.LayerParameter(name="a", type="X")
    assert harvest_policy.unread_fields(lp, ("name",)) == ["type"]
    lp.type = ""
    lp.convolution_param.num_output = 0             # set, but to the default
    lp.convolution_param.bias_term = True
    assert lp.HasField("convolution_param")
    assert harvest_policy.unread_fields(lp, ("name",)) == []
    lp.convolution_param.num_output = 8
    lp.bottom.append("data")
    assert harvest_policy.unread_fields(lp, ("name",)) == ["bottom", "convolution_param"]
    assert harvest_policy.unread_fields(lp, ("name", "bottom", "convolution_param")) == []
