"""Checkpoints: when, the files, the manifest, verification, resume and reuse of params by name.

A checkpoint is taken after step N (N updates done) when ``N >= checkpoint_after`` and
``(N - checkpoint_after) % checkpoint_frequency == 0`` (checkpoint_frequency > 0), plus a final
one. Files under ``<workspace>/checkpoint/`` (each written atomically, mode from the umask)::

    step<N>-worker<id>.bin   the params worker id owns (name, version, values, SFB history), its
                             data layers' cursors and random state, its random generator
    step<N>-server<id>.bin   the server's slices (offset, values, solver history)
    step<N>.manifest         DistManifest, written last: the files above with their sizes and
                             checksums, current_step, solver type and (format 3) the shape that
                             wrote them and each batch layer's total batch

The file format is in :mod:`caffepy.dist.checkpoint_format` (format 2: a protobuf header, then
raw little-endian buffers, so a file may be any size; format 1 of caffepy 0.1 is still read).

A step is complete when its manifest parses, every file it lists exists with the recorded size and,
when verified (resume), the recorded checksum (``blake2b``). ``--resume`` takes the latest complete
step and falls back to the one before with a WARNING naming the bad file. ``checkpoint_keep: K``
(ClusterParameter) removes all but the last K complete steps after each manifest. Servers rebuild
their slices from the server files of server group 0 by param name and offset (so the server count
may change), with history and version; the step counter and current_step continue; a resume on
another shape is :mod:`caffepy.dist.elastic`. :func:`init_net` initialises
any net from a checkpoint by param name. ``caffepy.dist.workspace`` holds the checks made before a
run starts (an existing checkpoint without ``--resume`` / ``--overwrite``; a workspace every rank
sees).
"""
import glob
import hashlib
import os
import re

import numpy as np

from ..errors import CaffeError
from ..log import info, warning
from ..proto import caffe_pb2, io as proto_io
from .checkpoint_format import (FORMAT, MAGIC, MAX_HISTORY, Slice, encode,  # noqa: F401
                                make_slice, read_file, read_slices)

_MANIFEST = re.compile(r"step(\d+)\.manifest$")
HASH = "blake2b"
MANIFEST_FORMAT = 3     # format 2 files; the manifest records the shape and the total batch
_written = {}      # abs path -> (size, mtime_ns, checksum) of the files this process wrote


def is_checkpoint_step(step, solver_param):
    freq, after = solver_param.checkpoint_frequency, solver_param.checkpoint_after
    return freq > 0 and step >= after and (step - after) % freq == 0


def checkpoint_dir(workspace):
    return os.path.join(workspace, "checkpoint")


def file_name(step, role, ident):
    return "step%d-%s%d.bin" % (step, role, ident)


def write_file(workspace, step, role, ident, slices, current_step=0, solver_type="",
               layer_state=(), random=None):
    """Write one checkpoint file atomically; returns its base name."""
    ck = caffe_pb2.DistCheckpoint()
    ck.step, ck.role, ck.id, ck.current_step, ck.solver_type = step, role, ident, current_step, solver_type
    ck.layer_state.extend(layer_state)
    if random is not None:
        ck.random.CopyFrom(random)
    chunks = encode(ck, slices)
    name = file_name(step, role, ident)
    path = os.path.abspath(os.path.join(checkpoint_dir(workspace), name))
    digest = hashlib.blake2b()
    for c in chunks:
        digest.update(c)
    proto_io.atomic_write(path, chunks)
    st = os.stat(path)
    _written[path] = (st.st_size, st.st_mtime_ns, "%s:%s" % (HASH, digest.hexdigest()))
    return name


def checksum(path):
    """``blake2b:<hex>`` of a file (from the writer's record when this process wrote it)."""
    path = os.path.abspath(path)
    st = os.stat(path)
    known = _written.get(path)
    if known and known[:2] == (st.st_size, st.st_mtime_ns):
        return known[2]
    digest = hashlib.blake2b()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return "%s:%s" % (HASH, digest.hexdigest())


def write_manifest(workspace, step, files, current_step, solver_type, nservers, nworkers, keep=0,
                   shape=None):
    """Write the manifest of a step (sizes and checksums of ``files``) last, atomically; then keep
    only the last ``keep`` complete steps (0: all). ``shape``: the cluster's
    :class:`caffepy.dist.elastic.Shape`, recorded for a resume onto another shape."""
    d = checkpoint_dir(workspace)
    m = caffe_pb2.DistManifest()
    m.step, m.current_step, m.solver_type = step, current_step, solver_type
    m.nservers, m.nworkers, m.format = nservers, nworkers, MANIFEST_FORMAT
    if shape is not None:
        shape.record(m)
    for f in sorted(files):
        path = os.path.join(d, f)
        if not os.path.exists(path):
            raise CaffeError("checkpoint step %d: %s was reported written but is not in %s (is the "
                             "workspace on a filesystem every host shares?)" % (step, f, d))
        m.file.append(f)
        m.size.append(os.path.getsize(path))
        m.checksum.append(checksum(path))
    path = os.path.join(d, "step%d.manifest" % step)
    proto_io.write_binary(m, path)
    info("checkpoint.py", "Checkpoint of step %d complete (%s)" % (step, path))
    if keep > 0:
        prune(workspace, keep)
    return path


def read_manifest(path):
    m = caffe_pb2.DistManifest()
    proto_io.read_binary(path, m)
    return m


def manifests(workspace):
    """[(step, path)] of every step<N>.manifest, newest first."""
    found = []
    for path in glob.glob(os.path.join(checkpoint_dir(workspace), "step*.manifest")):
        match = _MANIFEST.search(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found, reverse=True)


def problem(workspace, manifest, verify=True):
    """Why a step is not usable (one line naming the file), or None. Sizes are always checked,
    checksums when ``verify`` (format 1 manifests record neither: existence only)."""
    d = checkpoint_dir(workspace)
    for i, f in enumerate(manifest.file):
        if not isinstance(f, str) or f != os.path.basename(f) or f in ("", ".", "..") \
                or not f.isprintable():
            return "%s lists %r, not a file name in %s" % (d, f, d)
        path = os.path.join(d, f)
        if not os.path.exists(path):
            return "%s is missing" % path
        if i < len(manifest.size):
            size = os.path.getsize(path)
            if size != manifest.size[i]:
                return "%s is truncated or damaged (%d bytes, the manifest says %d)" % (
                    path, size, manifest.size[i])
        if verify and i < len(manifest.checksum) and checksum(path) != manifest.checksum[i]:
            return "%s is damaged (checksum differs from the manifest's)" % path
    return None


def latest_complete(workspace, verify=False):
    """(step, manifest) of the latest complete checkpoint in ``workspace``, or (None, None).
    With ``verify`` (resume) checksums are compared too, and each step passed over is a WARNING."""
    for step, path in manifests(workspace):
        try:
            m = read_manifest(path)
        except CaffeError as e:
            why = str(e)
        else:
            why = problem(workspace, m, verify)
            if why is None:
                return step, m
        if verify:
            warning("checkpoint.py", "Checkpoint step %d not usable: %s; trying the previous one"
                    % (step, why))
    return None, None


def prune(workspace, keep):
    """Remove every step older than the last ``keep`` complete ones (manifest first, then files)."""
    complete = []
    for step, path in manifests(workspace):
        if len(complete) == keep:
            break
        try:
            if problem(workspace, read_manifest(path), verify=False) is None:
                complete.append(step)
        except CaffeError:
            continue
    if len(complete) < keep:
        return
    oldest = min(complete)
    d = checkpoint_dir(workspace)
    stale = [(s, p) for s, p in manifests(workspace) if s < oldest]
    for _, path in stale:
        os.remove(path)
    for path in glob.glob(os.path.join(d, "step*-*.bin")):
        match = re.match(r"step(\d+)-", os.path.basename(path))
        if match and int(match.group(1)) < oldest:
            os.remove(path)
            _written.pop(os.path.abspath(path), None)


def describe_latest(workspace):
    step, _ = latest_complete(workspace)
    if step is None:
        return "no complete checkpoint in %s" % checkpoint_dir(workspace)
    return "last complete checkpoint: step %d in %s" % (step, checkpoint_dir(workspace))


def _listed(name, d):
    """A file name the manifest lists: a plain name in the checkpoint directory ``d``."""
    if not isinstance(name, str) or name != os.path.basename(name) or name in ("", ".", "..") \
            or not name.isprintable():
        raise CaffeError("%s: the manifest lists %r, not a file name in it" % (d, name))
    return name


def full_params(workspace, manifest, dtype, role="server"):
    """{name: (values, [history])} assembled from a complete step's files of ``role``.

    Server files: slices of server group 0 (the others hold replicas); worker files: whole params.
    """
    d = checkpoint_dir(workspace)
    out, read, held = {}, [], {}
    for f in manifest.file:
        if "-%s" % role not in _listed(f, d):
            continue
        path = os.path.join(d, f)
        for s, data, history in read_slices(path)[1]:
            read.append((path, s, data, history))
            held[s.name] = held.get(s.name, 0) + data.size
    for path, s, data, history in read:
        count = int(s.count)
        if s.name not in out:
            if not 0 <= count <= held[s.name]:      # checked before the arrays are allocated
                raise CaffeError("%s: param %s declares %d values; the step's files hold %d"
                                 % (path, s.name, count, held[s.name]))
            out[s.name] = (np.zeros(count, dtype), [np.zeros(count, dtype) for _ in history],
                           np.zeros(count, bool))
        values, hist, seen = out[s.name]
        if len(history) != len(hist) or count != values.size:
            raise CaffeError("%s: slice %s of param %s differs from its other slices (count %d, "
                             "%d history arrays)" % (path, s.slice, s.name, count, len(history)))
        if s.table_shards:      # rows slice, slice + table_shards, ... of a sharded table
            rows, step = (int(s.shape.dim[0]) if len(s.shape.dim) else 0), int(s.table_shards)
            if rows <= 0 or count % rows or not 0 <= s.slice < step or \
                    data.size != len(range(int(s.slice), rows, step)) * (count // rows):
                raise CaffeError("%s: table slice %s of %s (%d values) does not fit %d rows in %d "
                                 "shards" % (path, s.slice, s.name, data.size, rows, step))
            pick = lambda a: a.reshape(rows, -1)[int(s.slice)::step]  # noqa: E731
            if pick(seen).all():
                continue
            pick(values)[...] = data.reshape(pick(values).shape)
            for h, src in zip(hist, history):
                pick(h)[...] = src.reshape(pick(h).shape)
            pick(seen)[...] = True
            continue
        lo, hi = int(s.offset), int(s.offset) + data.size
        if lo < 0 or hi > count:
            raise CaffeError("%s: slice %s of %s holds values %d..%d of %d"
                             % (path, s.slice, s.name, lo, hi, count))
        if seen[lo:hi].all():
            continue  # a replica from another server group
        values[lo:hi] = data
        for h, src in zip(hist, history):
            h[lo:hi] = src
        seen[lo:hi] = True
    return {name: (v, h) for name, (v, h, seen) in out.items()}


def param_versions(workspace, manifest):
    """{param name: version} of a step's server files (server group 0): the updates each param had
    (a param cut in slices: its least updated slice's)."""
    d = checkpoint_dir(workspace)
    first = manifest.nservers_per_group or manifest.nservers    # server group 0: ids below
    out = {}
    for f in manifest.file:
        match = re.search(r"-server(\d+)\.bin$", _listed(f, d))
        if not match or (first and int(match.group(1)) >= first):
            continue
        ck = read_file(os.path.join(d, f))
        for s in ck.slices:
            if not s.table_shards:
                out[s.name] = min(out.get(s.name, s.version), int(s.version))
    return out


def worker_states(workspace, manifest):
    """{worker id: DistCheckpoint header} of the step's worker files (data layer and RNG state)."""
    d = checkpoint_dir(workspace)
    out = {}
    for f in manifest.file:
        if "-worker" in _listed(f, d):
            ck = read_file(os.path.join(d, f))
            out[int(ck.id)] = ck
    return out


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
        step, manifest = latest_complete(source, verify=True)
        if step is None:
            raise CaffeError("%s: no complete checkpoint" % checkpoint_dir(source))
        return source, manifest
    path = os.path.join(checkpoint_dir(source), "step%d.manifest" % step)
    if not os.path.exists(path):
        raise CaffeError("%s: no checkpoint manifest for step %d" % (path, step))
    return source, read_manifest(path)
