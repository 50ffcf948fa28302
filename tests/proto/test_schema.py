"""The compiled schema (caffepy.proto.caffe_pb2) against BVLC's facts and proto/additions.json.

* every BVLC message, field (name, number, type, label, default, packed, type name) and enum value
  is reproduced exactly; anything extra is declared in proto/additions.json;
* additions collide with no BVLC number and keep out of caffepy's reserved ranges;
* the committed caffe.proto / caffe_pb2.py are what tools/gen_caffe_proto.py makes now;
* the model zoo parses.
"""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from google.protobuf.descriptor import FieldDescriptor as FD

from caffepy.proto import caffe_pb2, field_label
from tests.conftest import ROOT, shared_path


TYPES = {"double": FD.TYPE_DOUBLE, "float": FD.TYPE_FLOAT, "int64": FD.TYPE_INT64,
         "uint64": FD.TYPE_UINT64, "int32": FD.TYPE_INT32, "uint32": FD.TYPE_UINT32,
         "bool": FD.TYPE_BOOL, "string": FD.TYPE_STRING, "bytes": FD.TYPE_BYTES,
         "message": FD.TYPE_MESSAGE, "enum": FD.TYPE_ENUM}


@pytest.fixture(scope="module")
def schema():
    with open(shared_path("caffe-schema", "caffe-schema.json")) as f:
        return json.load(f)


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_caffe_proto", os.path.join(ROOT, "tools", "gen_caffe_proto.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def additions():
    """additions.json merged with proto/additions.d/*.json, as the generator merges them."""
    return _generator().load_additions()


@pytest.fixture(scope="module")
def harvest():
    """proto/harvest.json: what forks define beyond BVLC and the curated additions."""
    with open(os.path.join(ROOT, "proto", "harvest.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def harvested():
    """caffepy/proto/harvested_fields.json: the fields declared only because of the harvest."""
    with open(os.path.join(ROOT, "caffepy", "proto", "harvested_fields.json")) as f:
        return json.load(f)


def _harvested_in(harvested, msg_name):
    return {k.split(".", 1)[1] for k in harvested if "=" not in k and k.rsplit(".", 1)[0] == msg_name}


def _descriptor(name):
    return caffe_pb2.DESCRIPTOR.message_types_by_name[name]


def _same_default(fd, field):
    if "default" not in field:
        return not fd.has_default_value
    want = field["default"]
    if fd.type == FD.TYPE_ENUM:
        return fd.default_value == fd.enum_type.values_by_name[want].number
    if fd.type == FD.TYPE_FLOAT:
        return np.float32(fd.default_value) == np.float32(want)
    if fd.type == FD.TYPE_BYTES:
        return fd.default_value == want.encode()
    return fd.default_value == want and type(fd.default_value) is type(want)


def _check_field(msg_name, fd, field):
    where = "%s.%s" % (msg_name, field["name"])
    assert fd.number == field["number"], where
    assert fd.type == TYPES[field["type"]], where
    assert field_label(fd) == field["label"], where
    assert _same_default(fd, field), "%s default %r != %r" % (where, fd.default_value,
                                                              field.get("default"))
    assert bool(fd.GetOptions().packed) == bool(field.get("packed", False)), where
    if field["type"] == "message":
        assert fd.message_type.name == field["type_name"].split(".")[-1], where
    if field["type"] == "enum":
        assert fd.enum_type.name == field["type_name"].split(".")[-1], where


def test_bvlc_messages_and_fields_exact(schema, additions, harvest, harvested):
    added = additions["fields"]
    for msg in schema["messages"]:
        desc = _descriptor(msg["name"])
        for field in msg["fields"]:
            _check_field(msg["name"], desc.fields_by_name[field["name"]], field)
        extra = set(desc.fields_by_name) - {f["name"] for f in msg["fields"]}
        curated = {f["name"] for f in added.get(msg["name"], [])}
        assert extra - curated == _harvested_in(harvested, msg["name"]), msg["name"]
        harvested_names = set(harvest["fields"].get(msg["name"], {}))
        if msg["name"] == "V1LayerParameter":    # also 2014 forks' fields of LayerParameter
            harvested_names |= set(harvest["fields"]["LayerParameter"])
        assert extra - curated <= harvested_names, msg["name"]
        assert extra >= curated, msg["name"]
        for sub in desc.nested_types:      # only messages that forks nest there
            assert "%s.%s" % (msg["name"], sub.name) in harvest["messages"], msg["name"]


def test_harvested_fields_collide_with_nothing(harvested):
    """Each message's numbers and JSON names are unique (the compiled pool checks the numbers too),
    and every harvested field has its forks."""
    for key, entry in harvested.items():
        assert entry["count"] >= len(entry["forks"]) >= 1, key
        if "=" in key:
            continue
        msg_name, name = key.rsplit(".", 1)
        desc = caffe_pb2.DESCRIPTOR.message_types_by_name.get(msg_name)
        if desc is None:   # nested
            outer, inner = msg_name.split(".", 1)
            desc = caffe_pb2.DESCRIPTOR.message_types_by_name[outer].nested_types_by_name[inner]
        assert name in desc.fields_by_name, key
        numbers = [f.number for f in desc.fields]
        assert len(numbers) == len(set(numbers)), msg_name


def _harvested_value_names(harvest, qual):
    """Values of ``qual`` that the harvest gives it: its own, and those of the old-format enum that
    became it (2014 forks' LayerParameter.LayerType is BVLC's later V1LayerParameter.LayerType)."""
    names = set(harvest["enum_values"].get(qual, {}))
    if qual == "V1LayerParameter.LayerType":
        names |= set(harvest["enums"]["LayerParameter.LayerType"]["values"])
    return names


def test_bvlc_enums_exact(schema, additions, harvest):
    added_values = additions["enum_values"]
    added_enums = additions["message_enums"]
    for enum in schema["enums"]:
        got = {v.name: v.number for v in caffe_pb2.DESCRIPTOR.enum_types_by_name[enum["name"]].values}
        forks = set(harvest["enum_values"].get(enum["name"], {}))
        extra = {k: v for k, v in added_values.get(enum["name"], {}).items() if not k.startswith("_")}
        assert {k: v for k, v in got.items() if k not in forks} == dict(enum["values"], **extra)
        assert not set(extra.values()) & set(enum["values"].values()), enum["name"]
    for msg in schema["messages"]:
        desc = _descriptor(msg["name"])
        for enum in msg["enums"]:
            qual = "%s.%s" % (msg["name"], enum["name"])
            got = {v.name: v.number for v in desc.enum_types_by_name[enum["name"]].values}
            extra = {k: v for k, v in added_values.get(qual, {}).items() if not k.startswith("_")}
            forks = _harvested_value_names(harvest, qual) - set(enum["values"]) - set(extra)
            assert {k: v for k, v in got.items() if k not in forks} == dict(enum["values"], **extra), qual
            assert not set(extra) & set(enum["values"]), qual
            assert not set(extra.values()) & set(enum["values"].values()), qual
            assert len(set(got.values())) == len(got), qual
        names = {e["name"] for e in msg["enums"]} | {e["name"] for e in added_enums.get(msg["name"], [])}
        names |= {e.split(".", 1)[1] for e in harvest["enums"] if e.split(".")[0] == msg["name"]}
        assert set(desc.enum_types_by_name) <= names, msg["name"]


def test_new_messages_compiled_as_declared(additions, harvested):
    for msg in additions["messages"]:
        desc = _descriptor(msg["name"])
        added = additions["fields"].get(msg["name"], [])  # a later fork's fields on a fork message
        assert set(desc.fields_by_name) - _harvested_in(harvested, msg["name"]) == {
            f["name"] for f in msg["fields"] + added}, msg["name"]
        for field in msg["fields"] + added:
            _check_field(msg["name"], desc.fields_by_name[field["name"]], field)


def test_additions_collide_with_nothing(schema, additions):
    bvlc = {m["name"]: m for m in schema["messages"]}
    names = {m["name"] for m in additions["messages"]}
    assert not names & set(bvlc), "a new message reuses a BVLC name"
    assert len(names) == len(additions["messages"]), "two added messages share a name"
    bvlc.update((m["name"], m) for m in additions["messages"])  # fields added to fork messages
    reserved = additions["reserved"]
    for msg_name, fields in additions["fields"].items():
        numbers = [f["number"] for f in bvlc[msg_name]["fields"]] + [f["number"] for f in fields]
        assert len(numbers) == len(set(numbers)), msg_name
        for f in fields:
            assert not 19000 <= f["number"] <= 19999, "%s.%s" % (msg_name, f["name"])
            lo, hi = reserved.get(msg_name, (0, -1))
            assert not lo <= f["number"] <= hi or "caffepy" in f.get("note", ""), \
                "%s.%s sits in caffepy's reserved range" % (msg_name, f["name"])
    assert set(reserved) >= {"LayerParameter", "SolverParameter"}


def test_ceil_mode_field():
    fd = caffe_pb2.PoolingParameter.DESCRIPTOR.fields_by_name["ceil_mode"]
    assert fd.type == FD.TYPE_BOOL and fd.default_value is True
    assert caffe_pb2.PoolingParameter().ceil_mode is True


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("grpc_tools") is None, reason="needs grpcio-tools")
def test_generated_files_not_stale(tmp_path):
    shared_path("caffe-schema", "caffe-schema.json")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_caffe_proto.py"),
                    "--out-dir", str(tmp_path)], check=True, capture_output=True)
    for fresh, committed in [("caffe.proto", os.path.join(ROOT, "proto", "caffe.proto")),
                             ("harvested_fields.json",
                              os.path.join(ROOT, "caffepy", "proto", "harvested_fields.json"))]:
        with open(tmp_path / fresh, "rb") as a, open(committed, "rb") as b:
            assert a.read() == b.read(), "%s is stale: run tools/gen_caffe_proto.py" % committed
    # caffe_pb2.py is committed as grpcio-tools 1.62 writes it (no runtime version check, so it
    # imports on protobuf 4.21 to 7); another protoc writes other Python around the same schema,
    # so the check is on the serialized FileDescriptorProto each module embeds
    assert _embedded_descriptor(tmp_path / "caffe_pb2.py") == _embedded_descriptor(
        os.path.join(ROOT, "caffepy", "proto", "caffe_pb2.py")), \
        "caffepy/proto/caffe_pb2.py is stale: run tools/gen_caffe_proto.py (grpcio-tools 1.62)"


def _embedded_descriptor(path):
    """The serialized FileDescriptorProto passed to AddSerializedFile in a generated module."""
    import ast
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile":
            return ast.literal_eval(node.args[0])
    raise AssertionError("%s: no AddSerializedFile call" % path)


@pytest.mark.slow
def test_model_zoo_parses():
    """Every catalogued zoo file reads (text, upgraded); the count is reported and must stay high."""
    from caffepy.errors import ProtoError
    from caffepy.proto import io
    zoo = shared_path("modelzoo")
    with open(os.path.join(zoo, "CATALOG.json")) as f:
        catalog = json.load(f)
    failed = []
    for entry in catalog:
        path = os.path.join(zoo, entry["path"])
        reader = io.read_solver if entry["kind"] == "solver" else io.read_net
        try:
            reader(path)
        except ProtoError as e:
            failed.append(str(e))
    ok = len(catalog) - len(failed)
    print("model zoo: %d of %d files parse" % (ok, len(catalog)))
    assert ok >= 0.98 * len(catalog), failed[:5]
