"""The minimal inputs the fuzzer found escaping a reader, one per fix: each now ends in a one-line
caffepy error naming the file (or rank), checked in a forked child with the harness' limits."""
import os
import struct

import numpy as np
import pytest

import harness
import readers
from caffepy.proto import caffe_pb2


def _err(fn, name, *args):
    out = harness.check(fn, name, *args)
    assert out.kind == "error", out
    return out.message


def _file(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(p)


def test_prototxt_deeply_nested_unknown_field(tmp_path):
    from caffepy.proto.io import read_net
    path = _file(tmp_path, "n.prototxt", "layer { " + "a { " * 3000)
    _err(read_net, path, path)


def test_caffemodel_shape_mismatch_names_the_file(tmp_path):
    param = caffe_pb2.NetParameter()
    param.ParseFromString(readers.caffemodel_seeds()[0])
    param.layer[1].blobs[0].shape.dim[0] = 10 ** 12
    path = _file(tmp_path, "w.caffemodel", param.SerializeToString())
    assert "Cannot copy param 0" in _err(readers._copy_from, path, path)


def test_caffemodel_raw_blob_of_another_type_names_the_file(tmp_path):
    param = caffe_pb2.NetParameter()
    param.ParseFromString(readers.caffemodel_seeds()[2])      # raw fp16
    param.layer[1].blobs[0].raw_data_type = caffe_pb2.INT
    path = _file(tmp_path, "w.caffemodel", param.SerializeToString())
    assert "not a float type" in _err(readers._copy_from, path, path)


def test_solverstate_history_count_differs_from_shape(tmp_path):
    state = caffe_pb2.SolverState()
    state.ParseFromString(readers.solverstate_seeds()[0])
    state.history[0].shape.dim.append(2 ** 62)
    path = _file(tmp_path, "s.solverstate", state.SerializeToString())
    assert "history blob 0" in _err(readers._read_state_both, path, path)


def test_hdf5_weights_without_data_group_and_not_hdf5(tmp_path):
    import h5py
    path = str(tmp_path / "w.caffemodel.h5")
    with h5py.File(path, "w") as f:
        f.create_group("diff")
    _err(readers._load_hdf5, path, path)
    path = _file(tmp_path, "x.caffemodel.h5", b"\x89HDF\r\n")
    _err(readers._load_hdf5, path, path)


def test_hdf5_data_group_where_a_dataset_belongs(tmp_path):
    import h5py
    path = str(tmp_path / "d.h5")
    with h5py.File(path, "w") as f:
        f.create_group("data")
        f.create_dataset("label", data=np.zeros(4, np.float32))
    _err(readers._hdf5_data_run, path, path)


def test_solverstate_h5_iter_not_an_integer(tmp_path):
    import h5py
    path = str(tmp_path / "s.solverstate.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("iter", data=np.float32(np.nan))
    _err(readers._read_state_both, path, path)


def _checkpoint(tmp_path, edit=None, manifest_edit=None):
    from caffepy.dist import checkpoint as ck
    d = ck.checkpoint_dir(str(tmp_path))
    os.makedirs(d)
    files = dict(readers.checkpoint_seed())
    name = "step5-server0.bin"
    if edit:
        raw = files[name]
        n = struct.unpack("<Q", raw[8:16])[0]
        msg = caffe_pb2.DistCheckpoint()
        msg.ParseFromString(raw[16:16 + n])
        edit(msg)
        head = msg.SerializeToString()
        files[name] = raw[:8] + struct.pack("<Q", len(head)) + head + raw[16 + n:]
    m = caffe_pb2.DistManifest()
    m.ParseFromString(files["step5.manifest"])
    for i, f in enumerate(m.file):
        m.size[i] = len(files[f])
    if manifest_edit:
        manifest_edit(m)
    files["step5.manifest"] = m.SerializeToString()
    for f, data in files.items():
        _file(tmp_path / "checkpoint", f, data)
    return str(tmp_path), os.path.join(d, "step5.manifest"), d


def test_checkpoint_slice_of_object_dtype(tmp_path):
    ws, manifest, d = _checkpoint(tmp_path, edit=lambda m: setattr(m.slices[0], "raw_dtype", "|O"))
    assert "not a number type" in _err(readers._ckpt_run, d, ws, manifest, False)


def test_checkpoint_count_beyond_the_files_is_refused_before_allocating(tmp_path):
    ws, manifest, d = _checkpoint(tmp_path, edit=lambda m: setattr(m.slices[0], "count", 10 ** 12))
    assert "declares 1000000000000 values" in _err(readers._ckpt_run, d, ws, manifest, False)


def test_checkpoint_negative_history_count(tmp_path):
    ws, manifest, d = _checkpoint(tmp_path, edit=lambda m: setattr(m.slices[0], "raw_history", -1))
    _err(readers._ckpt_run, d, ws, manifest, False)


def test_checkpoint_manifest_lists_a_path_outside(tmp_path):
    ws, manifest, d = _checkpoint(tmp_path, manifest_edit=lambda m: m.file.append("../../x-server9.bin"))
    _err(readers._ckpt_run, d, ws, manifest, True)


@pytest.mark.parametrize("text", ['{"schema": "caffepy.netjson", "version": 1, "nodes": '
                                  '[{"id": {}, "kind": "layer", "name": "a"}]}',
                                  '{"schema": "caffepy.netjson", "version": 1, "nodes": 3}',
                                  '{"schema": "caffepy.netjson", "version": 1, "links": [1]}',
                                  "[" * 100000], ids=["id-a-dict", "nodes-not-a-list",
                                                      "link-not-an-object", "deep-nesting"])
def test_netjson_wrong_types_and_deep_nesting(tmp_path, text):
    path = _file(tmp_path, "n.json", text)
    _err(readers._read_net_json, path, path)


@pytest.mark.parametrize("descr", [(b"<f4", 10 ** 18), (b"<f4", -1), (b"|O", 1), (b"\xff\xfe", 1),
                                   (b"<f0", 1)], ids=["huge", "negative", "object", "not-ascii", "empty-type"])
def test_frame_buffer_sizes_and_types(descr):
    from caffepy.dist import frames
    entry = frames._MSG.pack(0, 1) + frames._BUF.pack(*descr)
    raw = frames.LEN.pack(len(entry)) + entry
    assert "rank 3" in _err(readers._plan_batch, "rank 3", raw)


@pytest.mark.parametrize("raw", [b"", b"\x01", b"\xff\xff\x00\x00", struct.pack("<I", 4) + b"\x09\x00\x00\x00"])
def test_frame_truncated(raw):
    _err(readers._plan_batch, "rank 3", raw)


def test_frame_inline_bucket_cut():
    raw = readers.frame_seeds()[0]
    _err(readers._plan_batch, "rank 3", raw[:-4])


def test_net_input_larger_than_memory(tmp_path):
    text = readers.TINY_NET.replace("dim: 5 dim: 5", "dim: 5000000000 dim: 5000000000")
    path = _file(tmp_path, "n.prototxt", text)
    weights = _file(tmp_path, "w.caffemodel", readers.caffemodel_seeds()[0])
    assert "do not fit in memory" in _err(readers._export, path, path, weights)


def test_lmdb_record_errors_name_the_database(tmp_path):
    from caffepy.data.db import open_db
    path = str(tmp_path / "train_lmdb")
    with open_db(path, "lmdb", "w") as db:
        db.put(b"00000000", b"\xff\xff\xff")
    _err(readers._lmdb_layer, path, path)


def test_prototxt_deeply_nested_repeated_v1_layer(tmp_path):
    from caffepy.proto.io import read_net
    path = _file(tmp_path, "n.prototxt", "layers { layer { } layer { " + "a { " * 3000)
    _err(read_net, path, path)


def test_solverstate_zero_dim_beside_dims_overflowing_intp(tmp_path):
    state = caffe_pb2.SolverState()
    state.ParseFromString(readers.solverstate_seeds()[0])
    del state.history[0].shape.dim[:]
    state.history[0].shape.dim.extend([0, 2 ** 40, 2 ** 40])
    state.history[0].ClearField("data")
    path = _file(tmp_path, "s.solverstate", state.SerializeToString())
    _err(readers._read_state_both, path, path)


def test_mean_zero_dim_beside_dims_overflowing_intp(tmp_path):
    from caffepy.data.datum import read_mean
    bp = caffe_pb2.BlobProto()
    bp.shape.dim.extend([0, 2 ** 40, 2 ** 40])
    path = _file(tmp_path, "m.binaryproto", bp.SerializeToString())
    _err(read_mean, path, path)


def test_caffemodel_value_field_longer_than_the_file(tmp_path):
    v = harness.varint
    blob = b"\x2a" + v(2 ** 70)                     # BlobProto.data, declared 2^70 bytes long
    layer = b"\x0a\x01c" + b"\x3a" + v(len(blob)) + blob
    net = b"\xa2\x06" + v(len(layer)) + layer      # NetParameter.layer (100)
    path = _file(tmp_path, "w.caffemodel", net)
    harness.check(readers._copy_from, path, path)     # (was an OverflowError)


def test_caffemodel_input_name_not_utf8(tmp_path):
    net = b"\x1a\x04da\x80\x80" + b"\x20\x01" * 4     # input: "da\x80\x80", input_dim: 1 x 4
    path = _file(tmp_path, "w.caffemodel", net)
    assert "not UTF-8" in _err(readers._copy_from, path, path)


def test_hdf5_data_member_names_that_are_not_printable_text(tmp_path):
    import h5py
    path = str(tmp_path / "d.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("data", data=np.zeros((4, 2), np.float32))
        f.create_dataset("la\nel", data=np.zeros(4, np.float32))
    assert "'la\\nel'" in _err(readers._hdf5_data_run, path, path)


def test_checkpoint_manifest_lists_a_name_with_a_newline(tmp_path):
    ws, manifest, d = _checkpoint(tmp_path, manifest_edit=lambda m: m.file.append("st\np5-worker0.bin"))
    _err(readers._ckpt_run, d, ws, manifest, False)


def test_frame_buffer_type_numpy_parses_as_python():
    from caffepy.dist import frames
    entry = frames._MSG.pack(0, 1) + frames._BUF.pack(b",f4", 1)
    _err(readers._plan_batch, "rank 3", frames.LEN.pack(len(entry)) + entry)


def test_checkpoint_dtype_numpy_parses_as_python(tmp_path):
    ws, manifest, d = _checkpoint(tmp_path, edit=lambda m: setattr(m.slices[0], "raw_dtype", ",f4"))
    _err(readers._ckpt_run, d, ws, manifest, False)


def test_net_with_two_layers_of_one_name_exports_or_fails_in_one_line(tmp_path):
    text = readers.TINY_NET.replace('name: "conv"', 'name: "data"')   # the Input layer's name
    path = _file(tmp_path, "n.prototxt", text)
    weights = _file(tmp_path, "w.caffemodel", readers.caffemodel_seeds()[0])
    harness.check(readers._export, str(tmp_path), path, weights)


def test_export_of_a_net_without_outputs_names_the_file(tmp_path):
    path = _file(tmp_path, "n.prototxt", 'layer { name: "data" type: "Input" top: "data" '
                 'input_param { shape { dim: 1 } } }\nlayer { name: "s" type: "Silence" bottom: "data" }')
    _err(readers._export, path, path, None)


def test_datum_with_a_negative_dimension_and_no_values():
    d = caffe_pb2.Datum(channels=1, height=-1, width=0)
    _err(readers._datum_record, "train_lmdb", d.SerializeToString(), "train_lmdb: key b'0'")
