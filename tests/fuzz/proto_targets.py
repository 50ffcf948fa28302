"""Fuzz targets for Caffe's protobuf-based inputs: prototxt nets and solvers, caffemodels (read by
``Net.copy_from`` and as nets), binary solverstates, mean binaryprotos, MPI frames (entries with a
DistHeader, parsed by ``frames.plan_batch``), the ONNX exporter's prototxt and caffemodel, and
Datum records, alone or read by an LMDB Data layer. Each target's ``make(src, workdir)`` writes one
input under ``workdir`` and returns ``(fn, args, name)``: the reader call to run and what its error
must name.
"""
import functools
import os

import numpy as np

try:
    from . import harness
    from .seeds import (caffemodel_seeds, mean_seed, mutate_message, mutate_proto_bytes,
                        mutate_text, _net_blobs, solverstate_seeds, text_seeds, TINY_NET, tiny_net,
                        _write)
except ImportError:             # imported as a top-level module (tools/fuzz.py, pytest rootdir)
    import harness
    from seeds import (caffemodel_seeds, mean_seed, mutate_message, mutate_proto_bytes, mutate_text,
                       _net_blobs, solverstate_seeds, text_seeds, TINY_NET, tiny_net, _write)


# -- targets ---------------------------------------------------------------------------------------
def _prototxt_net(src, workdir):
    from caffepy.proto.io import read_net
    nets, _ = text_seeds()
    seed = src.choice(nets)
    data = mutate_text(src, seed) if src.int(0, 9) else b"" if src.bool() else b" \n\t"
    path = _write(workdir, "net.prototxt", data)
    return read_net, (path,), path


def _prototxt_solver(src, workdir):
    from caffepy.proto.io import read_solver
    _, solvers = text_seeds()
    data = mutate_text(src, src.choice(solvers))
    path = _write(workdir, "solver.prototxt", data)
    return read_solver, (path,), path


def _caffemodel_bytes(src):
    from caffepy.proto import caffe_pb2
    seed = src.choice(caffemodel_seeds())
    op = src.int(0, 9)
    if op < 4:
        return harness.mutate_bytes(src, seed)
    if op < 9:
        return mutate_proto_bytes(src, seed, caffe_pb2.NetParameter, _net_blobs)
    return harness.random_bytes(src)


def _copy_from(path):
    tiny_net().copy_from(path)


def _caffemodel(src, workdir):
    path = _write(workdir, "w.caffemodel", _caffemodel_bytes(src))
    return _copy_from, (path,), path


def _binary_net(src, workdir):
    from caffepy.proto.io import read_net
    path = _write(workdir, "net.caffemodel", _caffemodel_bytes(src))
    return read_net, (path,), path


def _read_state_both(path):
    from caffepy.solvers import state
    state.read_state(path)
    state.read_data_state(path)


def _solverstate(src, workdir):
    from caffepy.proto import caffe_pb2
    seed = solverstate_seeds()[0]
    op = src.int(0, 9)
    if op < 4:
        data = harness.mutate_bytes(src, seed)
    elif op < 9:
        data = mutate_proto_bytes(src, seed, caffe_pb2.SolverState, lambda m: list(m.history))
    else:
        data = harness.random_bytes(src)
    path = _write(workdir, "s.solverstate", data)
    return _read_state_both, (path,), path


def _binaryproto(src, workdir):
    from caffepy.data.datum import read_mean
    from caffepy.proto import caffe_pb2
    seed = mean_seed()
    op = src.int(0, 9)
    if op < 4:
        data = harness.mutate_bytes(src, seed)
    elif op < 9:
        data = mutate_proto_bytes(src, seed, caffe_pb2.BlobProto, lambda m: [m])
    else:
        data = harness.random_bytes(src)
    path = _write(workdir, "mean.binaryproto", data)
    return read_mean, (path,), path


# MPI frames
@functools.lru_cache(None)
def frame_seeds():
    from caffepy.dist import frames
    from caffepy.proto import caffe_pb2
    out = []
    for sizes in ((3, 0), (5000,), (40000, 2), ()):
        entries, lists = [], []
        for k, n in enumerate(sizes or (0,)):
            h = caffe_pb2.DistHeader()
            h.dst = k
            h.step = 7
            bufs = ([np.arange(n, dtype=np.float32), np.arange(k + 1, dtype=np.int64)]
                    if sizes else [])
            entries.append(frames.encode(h.SerializeToString(), bufs))
            lists.append(bufs)
        out.append(frames.pack_batch(entries, lists)[0])
    return out


def _plan_batch(raw):
    from caffepy.dist import frames
    frames.plan_batch(raw, source=3)


def _frame(src, workdir):
    from caffepy.dist import frames
    op = src.int(0, 9)
    if op < 6:
        data = harness.mutate_bytes(src, src.choice(frame_seeds()))
    elif op < 9:      # an entry with drawn buffer descriptions
        descr = [(src.choice([b"<f4", b"<f8", b"|u1", b"<i8", b"|O", b"<U4", b"V0", b"xx",
                              b"\xff\xfe", b"<f0", b"", b"<M8", b">f4"]),
                  src.choice(harness.INTERESTING_INTS[:-1])) for _ in range(src.int(0, 3))]
        entry = frames._MSG.pack(0, len(descr)) + b"".join(frames._BUF.pack(c, n) for c, n in descr)
        data = frames.LEN.pack(len(entry)) + entry + src.bytes(src.int(0, 24))
    else:
        data = harness.random_bytes(src)
    return _plan_batch, (data,), "rank 3"


# the ONNX exporter's inputs
def _export(proto, weights):
    from caffepy.onnx.export import load_net, to_model
    to_model(load_net(proto, weights))


def _onnx(src, workdir):
    from caffepy.proto.io import read_net
    if src.bool():
        proto = _write(workdir, "net.prototxt", mutate_text(src, TINY_NET))
        weights = _write(workdir, "w.caffemodel", caffemodel_seeds()[0])
        return _export, (proto, weights), workdir       # the error names the net or the weights
    if src.bool():
        text = str(mutate_message(src, read_net(TINY_NET)))
        proto = _write(workdir, "net.prototxt", text.encode())
        weights = _write(workdir, "w.caffemodel", caffemodel_seeds()[0])
        return _export, (proto, weights), workdir
    proto = _write(workdir, "net.prototxt", TINY_NET.encode())
    weights = _write(workdir, "w.caffemodel", _caffemodel_bytes(src))
    return _export, (proto, weights), weights


# Datum records (LMDB / LevelDB values)
@functools.lru_cache(None)
def datum_seeds():
    import io
    from PIL import Image
    from caffepy.data.datum import array_to_datum, encoded_datum
    png = io.BytesIO()
    Image.fromarray(np.arange(48, dtype=np.uint8).reshape(4, 4, 3)).save(png, format="PNG")
    return [array_to_datum(np.arange(24, dtype=np.uint8).reshape(2, 3, 4), 1).SerializeToString(),
            array_to_datum(np.ones((1, 2, 2), np.float32), 0).SerializeToString(),
            encoded_datum(png.getvalue(), 3).SerializeToString()]


def _datum_record(value, what):
    from caffepy.data.datum import datum_to_array, parse_datum
    datum_to_array(parse_datum(value, what), None, what)


def _record_bytes(src):
    from caffepy.proto import caffe_pb2
    seed = src.choice(datum_seeds())
    op = src.int(0, 9)
    if op < 4:
        return harness.mutate_bytes(src, seed)
    if op < 9:
        d = caffe_pb2.Datum()
        d.ParseFromString(seed)
        if src.bool():
            setattr(d, src.choice(["channels", "height", "width"]),
                    src.choice([0, -1, 2 ** 31 - 1, -2 ** 31, 65536, 3]))
        else:
            mutate_message(src, d)
        return d.SerializeToString()
    return harness.random_bytes(src)


def _db_record(src, workdir):
    what = os.path.join(workdir, "train_lmdb") + ": key b'00000001'"
    return _datum_record, (_record_bytes(src), what), os.path.join(workdir, "train_lmdb")


def _lmdb_layer(db_path):
    from caffepy.layers.base import create_layer
    from caffepy.proto import caffe_pb2
    from caffepy.proto.io import parse_text
    from caffepy.blob import Blob
    lp = parse_text('name: "d" type: "Data" top: "data" top: "label" '
                    'data_param { source: "%s" backend: LMDB batch_size: 2 }' % db_path,
                    caffe_pb2.LayerParameter())
    layer = create_layer(lp, phase=caffe_pb2.TEST)
    tops = [Blob((), dtype=np.float32), Blob((), dtype=np.float32)]
    layer.setup([], tops)
    layer.reshape([], tops)
    layer.forward([], tops)


def _lmdb(src, workdir):
    from caffepy.data.db import open_db
    path = os.path.join(workdir, "train_lmdb")
    with open_db(path, "lmdb", "w") as db:
        for i in range(src.int(1, 3)):
            db.put(b"%08d" % i, _record_bytes(src) if src.int(0, 2) else src.choice(datum_seeds()))
    return _lmdb_layer, (path,), path
