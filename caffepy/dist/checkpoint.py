"""Checkpoints: when, the files, the manifest, resume and reuse of params by name.

A checkpoint is taken after step N (N updates done) when ``N >= checkpoint_after`` and
``(N - checkpoint_after) % checkpoint_frequency == 0`` (checkpoint_frequency > 0), plus a final
one. Files under ``<workspace>/checkpoint/`` (binary protobuf, each written atomically)::

    step<N>-worker<id>.bin   DistCheckpoint: name, version and values of the params worker id owns
    step<N>-server<id>.bin   DistCheckpoint: the server's slices (offset, values, solver history)
    step<N>.manifest         DistManifest, written last: the files above, current_step, solver type

A step is complete when its manifest exists and every file it lists does. ``--resume`` takes the
latest complete step; servers rebuild their slices from the server files of server group 0 by
param name and offset (so the server count may change), with history; the step counter and
current_step continue. :func:`init_net` initialises any net from a checkpoint by param name.
"""
import glob
import os
import re

import numpy as np

from ..errors import CaffeError
from ..log import info
from ..proto import caffe_pb2, io as proto_io

_MANIFEST = re.compile(r"step(\d+)\.manifest$")


def is_checkpoint_step(step, solver_param):
    freq, after = solver_param.checkpoint_frequency, solver_param.checkpoint_after
    return freq > 0 and step >= after and (step - after) % freq == 0


def checkpoint_dir(workspace):
    return os.path.join(workspace, "checkpoint")


def file_name(step, role, ident):
    return "step%d-%s%d.bin" % (step, role, ident)


def to_blobproto(arr, shape=None):
    bp = caffe_pb2.BlobProto()
    bp.shape.dim.extend(arr.shape if shape is None else shape)
    if arr.dtype == np.float64:
        bp.double_data.extend(arr.ravel())
    else:
        bp.data.extend(arr.ravel().astype(np.float32))
    return bp


def from_blobproto(bp, dtype):
    values = bp.double_data if len(bp.double_data) else bp.data
    return np.asarray(values, dtype=dtype)


def make_slice(name, p, k, offset, version, values, history=(), count=None, shape=None):
    s = caffe_pb2.DistSlice()
    s.name, s.param, s.slice, s.offset, s.version = name, p, k, offset, version
    s.data.CopyFrom(to_blobproto(values))
    for h in history:
        s.history.add().CopyFrom(to_blobproto(h))
    s.count = int(values.size if count is None else count)
    if shape is not None:
        s.shape.dim.extend(shape)
    return s


def write_file(workspace, step, role, ident, slices, current_step=0, solver_type=""):
    """Write one checkpoint file atomically; returns its base name."""
    ck = caffe_pb2.DistCheckpoint()
    ck.step, ck.role, ck.id, ck.current_step, ck.solver_type = step, role, ident, current_step, solver_type
    ck.slices.extend(slices)
    name = file_name(step, role, ident)
    proto_io.write_binary(ck, os.path.join(checkpoint_dir(workspace), name))
    return name


def write_manifest(workspace, step, files, current_step, solver_type, nservers, nworkers):
    m = caffe_pb2.DistManifest()
    m.step, m.current_step, m.solver_type = step, current_step, solver_type
    m.nservers, m.nworkers = nservers, nworkers
    m.file.extend(sorted(files))
    path = os.path.join(checkpoint_dir(workspace), "step%d.manifest" % step)
    proto_io.write_binary(m, path)
    info("checkpoint.py", "Checkpoint of step %d complete (%s)" % (step, path))
    return path


def read_manifest(path):
    m = caffe_pb2.DistManifest()
    proto_io.read_binary(path, m)
    return m


def latest_complete(workspace):
    """(step, manifest) of the latest complete checkpoint in ``workspace``, or (None, None)."""
    d = checkpoint_dir(workspace)
    found = []
    for path in glob.glob(os.path.join(d, "step*.manifest")):
        match = _MANIFEST.search(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    for step, path in sorted(found, reverse=True):
        try:
            m = read_manifest(path)
        except CaffeError:
            continue
        if all(os.path.exists(os.path.join(d, f)) for f in m.file):
            return step, m
    return None, None


def describe_latest(workspace):
    step, _ = latest_complete(workspace)
    if step is None:
        return "no complete checkpoint in %s" % checkpoint_dir(workspace)
    return "last complete checkpoint: step %d in %s" % (step, checkpoint_dir(workspace))


def read_file(path):
    ck = caffe_pb2.DistCheckpoint()
    proto_io.read_binary(path, ck)
    return ck


def full_params(workspace, manifest, dtype, role="server"):
    """{name: (values, [history])} assembled from a complete step's files of ``role``.

    Server files: slices of server group 0 (the others hold replicas); worker files: whole params.
    """
    d = checkpoint_dir(workspace)
    out = {}
    for f in manifest.file:
        if "-%s" % role not in f:
            continue
        ck = read_file(os.path.join(d, f))
        for s in ck.slices:
            count = int(s.count)
            if s.name not in out:
                nh = len(s.history)
                out[s.name] = (np.zeros(count, dtype), [np.zeros(count, dtype) for _ in range(nh)],
                               np.zeros(count, bool))
            values, hist, seen = out[s.name]
            if s.table_shards:      # rows slice, slice + table_shards, ... of a sharded table
                rows, step = int(s.shape.dim[0]), int(s.table_shards)
                pick = lambda a: a.reshape(rows, -1)[int(s.slice)::step]  # noqa: E731
                if pick(seen).all():
                    continue
                pick(values)[...] = from_blobproto(s.data, dtype).reshape(pick(values).shape)
                for h, bp in zip(hist, s.history):
                    pick(h)[...] = from_blobproto(bp, dtype).reshape(pick(h).shape)
                pick(seen)[...] = True
                continue
            n = len(s.data.double_data) or len(s.data.data)
            lo, hi = int(s.offset), int(s.offset) + n
            if seen[lo:hi].all():
                continue  # a replica from another server group
            values[lo:hi] = from_blobproto(s.data, dtype)
            for h, bp in zip(hist, s.history):
                h[lo:hi] = from_blobproto(bp, dtype)
            seen[lo:hi] = True
    return {name: (v, h) for name, (v, h, seen) in out.items()}


def init_net(net, source, step=None):
    """Copy params from a checkpoint (workspace dir or manifest) into ``net`` by param name.

    Returns ``{"matched": [...], "missing": [...], "mismatched": [(name, want, got)]}`` and logs it.
    """
    workspace, manifest = _locate(source, step)
    params = full_params(workspace, manifest, net.dtype, role="worker")
    for name, value in full_params(workspace, manifest, net.dtype, role="server").items():
        params.setdefault(name, value)      # sharded tables live in server files only
    report = {"matched": [], "missing": [], "mismatched": []}
    for name, blob in zip(net.param_display_names, net.learnable_params):
        if name not in params:
            report["missing"].append(name)
            continue
        values = params[name][0]
        if values.size != blob.count:
            report["mismatched"].append((name, blob.count, values.size))
            continue
        blob.data[...] = values.reshape(blob.shape)
        report["matched"].append(name)
    info("checkpoint.py", "Initialised from checkpoint step %d: %d matched, %d missing (%s), "
         "%d shape mismatches (%s)" % (manifest.step, len(report["matched"]), len(report["missing"]),
                                        ", ".join(report["missing"]), len(report["mismatched"]),
                                        ", ".join("%s: %d vs %d" % m for m in report["mismatched"])))
    return report


def _locate(source, step):
    if os.path.isfile(source):
        return os.path.dirname(os.path.dirname(os.path.abspath(source))), read_manifest(source)
    if step is None:
        step, manifest = latest_complete(source)
        if step is None:
            raise CaffeError("%s: no complete checkpoint" % checkpoint_dir(source))
        return source, manifest
    path = os.path.join(checkpoint_dir(source), "step%d.manifest" % step)
    if not os.path.exists(path):
        raise CaffeError("%s: no checkpoint manifest for step %d" % (path, step))
    return source, read_manifest(path)
