"""Fuzz targets for the HDF5, checkpoint and net JSON inputs: HDF5 weights, HDF5Data layer files
and HDF5 solverstates (files written by h5py with a drawn structure, or a real file's bytes
mutated), distributed checkpoint steps (worker and server files and their manifest) and net JSON
documents, with the seeds they start from. Each target's ``make(src, workdir)`` writes one input
under ``workdir`` and returns ``(fn, args, name)``: the reader call to run and what its error must
name.
"""
import functools
import json
import os
import shutil
import struct
import tempfile

import numpy as np

try:
    from . import harness
    from .proto_targets import _read_state_both
    from .seeds import (_FLOATS, _int_range, mutate_message, mutate_proto_bytes, ROOT, _seed_dir,
                        solverstate_seeds, tiny_net, _write)
except ImportError:             # imported as a top-level module (tools/fuzz.py, pytest rootdir)
    import harness
    from proto_targets import _read_state_both
    from seeds import (_FLOATS, _int_range, mutate_message, mutate_proto_bytes, ROOT, _seed_dir,
                       solverstate_seeds, tiny_net, _write)


# HDF5: files written by h5py with a drawn structure, or a real file's bytes mutated
def _h5_value(src):
    kind = src.int(0, 9)
    if kind == 0:
        return np.bytes_(b"text")
    if kind == 1:
        with np.errstate(over="ignore"):        # 1e308 -> inf in float32, as intended
            return np.float32(src.choice(_FLOATS))
    if kind == 2:
        return np.zeros((0, 3), np.float32)
    if kind == 3:
        return np.array([(1, 2.0)], dtype=[("a", "<i4"), ("b", "<f8")])
    if kind == 4:
        return np.ones(src.choice([(3, 2, 3, 3), (2, 27), (3,), (2,), (1, 1, 1, 1, 1)]), np.float16)
    if kind == 5:
        return np.array([True, False])
    if kind == 6:
        return np.array(["a", "bc"], dtype=object)
    if kind == 7:
        return np.full((2, 2), 7, np.int64)
    if kind == 8:
        return np.array(np.nan)
    return np.arange(src.choice([1, 3, 6, 54, 81]), dtype=np.float64)


def _h5_put(f, name, value):
    import h5py
    if value.dtype == object:
        f.create_dataset(name, data=value, dtype=h5py.string_dtype())
    else:
        f.create_dataset(name, data=value)


def _h5_structured(src, path, names):
    """An HDF5 file shaped like the readers' input, with drawn deviations."""
    import h5py
    with h5py.File(path, "w") as f:
        layout = src.int(0, 5)
        if layout == 0:
            _h5_put(f, src.choice(names), _h5_value(src))
            return
        for name in names:
            if src.int(0, 5) == 0:
                continue
            if layout == 1:
                _h5_put(f, name, _h5_value(src))
            else:
                g = f.require_group(name)
                for j in range(src.int(0, 3)):
                    key = src.choice([str(j), str(j), "x", "-1", "99"])
                    if key in g:
                        continue
                    if src.int(0, 4) == 0:
                        g.create_group(key)
                    else:
                        _h5_put(g, key, _h5_value(src))


@functools.lru_cache(None)
def hdf5_weight_seed():
    from caffepy.net.weights import save_hdf5
    path = os.path.join(_seed_dir(), "w.caffemodel.h5")
    save_hdf5(tiny_net(), path)
    with open(path, "rb") as f:
        return f.read()


def _load_hdf5(path):
    from caffepy.net.weights import load_hdf5
    load_hdf5(tiny_net(), path)


def _hdf5_weights(src, workdir):
    path = os.path.join(workdir, "w.caffemodel.h5")
    op = src.int(0, 9)
    if op < 3:
        _write(workdir, "w.caffemodel.h5", harness.mutate_bytes(src, hdf5_weight_seed()))
    elif op < 9:
        import h5py
        with h5py.File(path, "w") as f:
            top = src.choice(["data", "data", "data", "diff", "Data"])
            if src.int(0, 6) == 0:
                _h5_put(f, top, _h5_value(src))
            else:
                g = f.create_group(top)
                for name in ("conv", "ip", "relu", "nope"):
                    if src.int(0, 3) == 0:
                        continue
                    sub = g.create_group(name)
                    for j in range(src.int(0, 3)):
                        key = src.choice([str(j), str(j), str(j), "x"])
                        if key not in sub:
                            if src.int(0, 6) == 0:
                                sub.create_group(key)
                            else:
                                _h5_put(sub, key, _h5_value(src))
    else:
        _write(workdir, "w.caffemodel.h5", harness.random_bytes(src))
    return _load_hdf5, (path,), path


@functools.lru_cache(None)
def _hdf5_layer():
    from caffepy.layers.base import create_layer
    from caffepy.proto import caffe_pb2
    from caffepy.proto.io import parse_text
    d = _seed_dir()
    import h5py
    h5 = os.path.join(d, "train.h5")
    with h5py.File(h5, "w") as f:
        f.create_dataset("data", data=np.zeros((4, 2, 3), np.float32))
        f.create_dataset("label", data=np.arange(4, dtype=np.float32))
    listing = _write(d, "list.txt", h5.encode())
    lp = parse_text('name: "h5" type: "HDF5Data" top: "data" top: "label" '
                    'hdf5_data_param { source: "%s" batch_size: 2 }' % listing,
                    caffe_pb2.LayerParameter())
    layer = create_layer(lp, phase=caffe_pb2.TRAIN)
    from caffepy.blob import Blob
    tops = [Blob((), dtype=np.float32), Blob((), dtype=np.float32)]
    layer.setup([], tops)
    with open(h5, "rb") as f:
        seed = f.read()
    return layer, tops, seed


def _hdf5_data_run(path):
    layer, tops, _ = _hdf5_layer()
    layer.files = [path]
    layer.file_order = np.arange(1)
    layer._load(path)
    layer.reshape([], tops)
    layer.forward_cpu([], tops)


def _hdf5_data(src, workdir):
    path = os.path.join(workdir, "d.h5")
    op = src.int(0, 9)
    if op < 3:
        _write(workdir, "d.h5", harness.mutate_bytes(src, _hdf5_layer()[2]))
    elif op < 9:
        _h5_structured(src, path, ["data", "label"])
    else:
        _write(workdir, "d.h5", harness.random_bytes(src))
    return _hdf5_data_run, (path,), path


def _solverstate_h5(src, workdir):
    path = os.path.join(workdir, "s.solverstate.h5")
    op = src.int(0, 9)
    if op < 3:
        _write(workdir, "s.solverstate.h5", harness.mutate_bytes(src, solverstate_seeds()[1]))
    elif op < 9:
        import h5py
        with h5py.File(path, "w") as f:
            for name in ("iter", "current_step", "learned_net"):
                if src.int(0, 4):
                    _h5_put(f, name, _h5_value(src) if src.int(0, 2) == 0 else np.int32(3))
            if src.int(0, 3):
                g = f.create_group(src.choice(["history", "history", "caffepy_state"]))
                for j in range(src.int(0, 3)):
                    key = src.choice([str(j), str(j), "random", "x"])
                    if key not in g:
                        _h5_put(g, key, _h5_value(src))
    else:
        _write(workdir, "s.solverstate.h5", harness.random_bytes(src))
    return _read_state_both, (path,), path


# checkpoints
@functools.lru_cache(None)
def checkpoint_seed():
    """(workspace, {file name: bytes}) of a step written by caffepy's writer: a worker file, a
    server file (two slices and history), the manifest."""
    from caffepy.data.state import rng_state
    from caffepy.dist import checkpoint as ck
    ws = tempfile.mkdtemp(prefix="caffepy-fuzz-ckpt-")
    os.makedirs(ck.checkpoint_dir(ws))
    rng = np.random.default_rng(2)
    w = [ck.make_slice("conv_w", 0, 0, 0, 3, rng.standard_normal(54).astype(np.float32),
                       shape=(3, 2, 3, 3)),
         ck.make_slice("ip_b", 3, 0, 0, 3, rng.standard_normal(2).astype(np.float32))]
    s = [ck.make_slice("conv_w", 0, 0, 0, 3, rng.standard_normal(30).astype(np.float32),
                       history=[np.zeros(30, np.float32)], count=54),
         ck.make_slice("conv_w", 0, 1, 30, 3, rng.standard_normal(24).astype(np.float32),
                       history=[np.zeros(24, np.float32)], count=54),
         ck.make_slice("table", 4, 0, 0, 3, np.ones(6, np.float32), count=12, shape=(4, 3)),
         ck.make_slice("table", 4, 1, 0, 3, np.ones(6, np.float32), count=12, shape=(4, 3))]
    s[2].table_shards = s[3].table_shards = 2
    files = [ck.write_file(ws, 5, "worker", 0, w, random=rng_state(np.random.default_rng(0))),
             ck.write_file(ws, 5, "server", 0, s, current_step=1, solver_type="SGD")]
    ck.write_manifest(ws, 5, files, 1, "SGD", 1, 1)
    d = ck.checkpoint_dir(ws)
    out = {}
    for name in files + ["step5.manifest"]:
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    shutil.rmtree(ws, ignore_errors=True)
    return out


def _ckpt_header_edit(src, data):
    """A format-2 file whose header (a DistCheckpoint) got field-level edits."""
    from caffepy.proto import caffe_pb2
    n = struct.unpack("<Q", data[8:16])[0]
    msg = caffe_pb2.DistCheckpoint()
    msg.ParseFromString(data[16:16 + n])
    if len(msg.slices) and src.bool():
        s = src.choice(list(msg.slices))
        field = src.choice(["raw_offset", "raw_length", "raw_history", "count", "offset",
                            "table_shards", "raw_dtype", "shape", "slice"])
        if field == "raw_dtype":
            s.raw_dtype = src.choice(["<f4", "<f8", "|O", "<U4", "V0", "S0", ">f4", "<i8", "bogus",
                                      "<f0", "|b1", "<c8", "<M8[s]", ""])
        elif field == "shape":
            del s.shape.dim[:]
            s.shape.dim.extend([src.choice([0, 1, 4, 5, -3, 10 ** 12])] * src.int(0, 3))
        else:
            lo, hi = _int_range(s.DESCRIPTOR.fields_by_name[field])
            setattr(s, field, src.choice([v for v in harness.INTERESTING_INTS if lo <= v <= hi]))
    else:
        mutate_message(src, msg)
    header = msg.SerializeToString()
    return data[:8] + struct.pack("<Q", len(header)) + header + data[16 + n:]


def _ckpt_run(ws, manifest_path, verify):
    from caffepy.dist import checkpoint as ck
    ck.latest_complete(ws, verify=verify)
    m = ck.read_manifest(manifest_path)
    for role in ("worker", "server"):
        ck.full_params(ws, m, np.float32, role=role)
    ck.worker_states(ws, m)


def _checkpoint(src, workdir):
    from caffepy.dist import checkpoint as ck
    from caffepy.proto import caffe_pb2
    files = dict(checkpoint_seed())
    d = ck.checkpoint_dir(workdir)
    os.makedirs(d, exist_ok=True)
    target = src.choice(sorted(files))
    data = files[target]
    op = src.int(0, 9)
    if op < 4:
        data = harness.mutate_bytes(src, data)
    elif op < 9:
        if target.endswith(".manifest"):
            data = mutate_proto_bytes(src, data, caffe_pb2.DistManifest)
        else:
            data = _ckpt_header_edit(src, data)
    else:
        data = harness.random_bytes(src)
    files[target] = data
    for name, blob in files.items():
        _write(d, name, blob)
    manifest = os.path.join(d, "step5.manifest")
    if not target.endswith(".manifest") and src.bool():    # sizes recorded as the file has them
        m = caffe_pb2.DistManifest()
        m.ParseFromString(files["step5.manifest"])
        for i, f in enumerate(m.file):
            m.size[i] = len(files[f])
            m.checksum[i] = ck.checksum(os.path.join(d, f))
        _write(d, "step5.manifest", m.SerializeToString())
    return _ckpt_run, (workdir, manifest, src.bool()), d    # an error names a file of the step


# net JSON
@functools.lru_cache(None)
def netjson_seed():
    from caffepy.draw.netjson import dumps, net_json
    from caffepy.proto.io import read_net
    text = open(os.path.join(ROOT, "models", "lenet", "lenet_train_test.prototxt")).read()
    return dumps(net_json(read_net(text)))


def _json_edit(src, doc):
    """Replace a value somewhere in ``doc`` with one of another type."""
    slots = []

    def walk(node, depth):
        if depth > 8:
            return
        if isinstance(node, dict):
            for k in list(node):
                slots.append((node, k))
                walk(node[k], depth + 1)
        elif isinstance(node, list):
            for i in range(len(node)):
                slots.append((node, i))
                walk(node[i], depth + 1)
    walk(doc, 0)
    if not slots:
        return doc
    for _ in range(src.int(1, 3)):
        node, key = src.choice(slots)
        node[key] = src.choice([None, 1, -1, 1e308, "x", [], {}, [1, 2], {"id": []}, True,
                                "ALL", "TEST", "layer", "blob", [[[]]], {"a": {"b": {}}}])
    return doc


def _read_net_json(path):
    from caffepy.draw.netjson import read_net_json, select_phase
    doc = read_net_json(path)
    for phase in ("TRAIN", "TEST", "ALL"):
        select_phase(doc, phase)


def _netjson(src, workdir):
    seed = netjson_seed()
    op = src.int(0, 9)
    if op < 3:
        data = harness.mutate_bytes(src, seed.encode())
    elif op < 8:
        data = json.dumps(_json_edit(src, json.loads(seed))).encode()
    elif op < 9:
        data = (src.choice(["[", "{\"a\":", "[{\"schema\": "])
                * src.choice([10, 1000, 100000])).encode()
    else:
        data = harness.random_bytes(src)
    path = _write(workdir, "net.json", data)
    return _read_net_json, (path,), path
