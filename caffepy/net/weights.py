"""Moving trained weights between a Net and files: .caffemodel (binary NetParameter) and HDF5.

Matching is by layer name, as Caffe's ``CopyTrainedLayersFrom``: source layers the net lacks are
ignored (logged as "Ignoring source layer X"); a layer with a different number of blobs, or a blob of
a different shape, is an error with Caffe's message. Legacy 4-d BlobProtos (num/channels/height/
width) match a target whose shape, padded with leading 1s to 4 axes, is the same (Caffe's
``ShapeEquals``), so old caffemodels load into nets with 2-d InnerProduct weights.

HDF5 layout (Caffe's ``ToHDF5``): group ``data/<layer>/<i>`` (and ``diff/<layer>/<i>`` with diffs).
"""
import logging
import os

import numpy as np

from ..blob import blobproto_shape
from ..errors import NetError, ShapeError, file_errors
from ..proto import caffe_pb2

log = logging.getLogger("caffepy")


def shape_string(shape):
    return "%s (%d)" % (" ".join(str(d) for d in shape), int(np.prod(shape, dtype=np.int64)))


def _legacy_equal(target_shape, proto):
    if len(target_shape) > 4:
        return False
    padded = (1,) * (4 - len(target_shape)) + tuple(target_shape)
    return padded == (proto.num, proto.channels, proto.height, proto.width)


def _proto_matches(target, proto):
    if any(proto.HasField(f) for f in ("num", "channels", "height", "width")):
        return _legacy_equal(target.shape, proto)
    return tuple(target.shape) == tuple(proto.shape.dim)


def copy_trained_layers(net, src_param, source_name="<NetParameter>", values=None):
    """Copy every source layer's blobs into the net's layer of the same name. ``values``: the blobs'
    packed values kept apart from the message ({(layer name, blob index): {field: array}}, from
    caffepy.proto.packed.split_net)."""
    names = net._layer_names
    for src in src_param.layer:
        if src.name not in names:
            log.info("Ignoring source layer %s", src.name)
            continue
        target = net.layers[names.index(src.name)]
        if not len(src.blobs) and not target.blobs:
            continue
        log.info("Copying source layer %s Type:%s #blobs=%d", src.name, src.type, len(src.blobs))
        if len(src.blobs) != len(target.blobs):
            raise NetError("%s: incompatible number of blobs for layer %s (source %d, target %d)"
                           % (source_name, src.name, len(src.blobs), len(target.blobs)))
        adopt = getattr(target, "adopt_source_blob", None)   # a layer that resizes its own blobs
        loose = not getattr(target.layer_param, "strict_dim", True)    # DeepLab v1's strict_dim
        for j, (bp, blob) in enumerate(zip(src.blobs, target.blobs)):
            if not _proto_matches(blob, bp) and adopt is not None and adopt(j, bp):
                continue
            if loose and not _proto_matches(blob, bp) and \
                    int(np.prod(blobproto_shape(bp))) == blob.count:
                bp = _with_shape(bp, blob.shape)        # loaded by count, as DeepLab v1 does
            if not _proto_matches(blob, bp):
                raise ShapeError(
                    "Cannot copy param %d weights from layer '%s'; shape mismatch.  Source param "
                    "shape is %s; target param shape is %s. To learn this layer's parameters from "
                    "scratch rather than copying from a saved net, rename the layer."
                    % (j, src.name, shape_string(blobproto_shape(bp)), shape_string(blob.shape)))
            blob.from_proto(bp, reshape=False,
                            values=None if values is None else values.get((src.name, j), {}))
        if target.layer_param.connectivity_mode:      # the SSL forks' WeightAlign
            from ..solvers.sparsity import disconnect
            disconnect(net, names.index(src.name))


def _with_shape(bp, shape):
    """A copy of BlobProto ``bp`` whose shape is ``shape`` (same count)."""
    out = caffe_pb2.BlobProto()
    out.CopyFrom(bp)
    for name in ("num", "channels", "height", "width"):
        out.ClearField(name)
    out.shape.ClearField("dim")
    out.shape.dim.extend(int(d) for d in shape)
    return out


def _layers_without_blobs(net):
    out = caffe_pb2.NetParameter()
    out.name = net.name
    for layer in net.layers:
        lp = out.layer.add()
        lp.CopyFrom(layer.layer_param)
        del lp.blobs[:]
    return out


def net_to_proto(net, write_diff=False):
    """The NetParameter Caffe's ``Net::ToProto`` writes: every layer's param, blobs as float data."""
    out = _layers_without_blobs(net)
    for lp, layer in zip(out.layer, net.layers):
        for blob in layer.blobs:
            lp.blobs.add().CopyFrom(blob.to_proto(write_diff=write_diff))
    return out


def save_caffemodel(net, path, write_diff=False):
    """Write ``net_to_proto(net)`` to ``path`` (atomically) without building the message: the blob
    values go to the file straight from the blobs' memory as packed floats (caffepy.proto.packed)."""
    from ..proto import io as proto_io, packed
    blobs = [[b.proto_chunks(write_diff) for b in layer.blobs] for layer in net.layers]
    proto_io.atomic_write(path, packed.net_chunks(_layers_without_blobs(net), blobs))


def _h5py():
    try:
        import h5py
    except ImportError:
        raise NetError("HDF5 weights need h5py: pip install 'caffepy[data]'")
    return h5py


def save_hdf5(net, path, write_diff=False):
    """The net's parameters (and diffs) as Caffe's HDF5 snapshot, written atomically."""
    h5py = _h5py()
    from ..proto.atomic import atomic_path
    with atomic_path(path, suffix=".h5") as tmp:
        with h5py.File(tmp, "w") as f:
            data = f.create_group("data")
            diff = f.create_group("diff") if write_diff else None
            for name, layer in zip(net._layer_names, net.layers):
                if not layer.blobs:
                    continue
                g = data.create_group(name)
                gd = diff.create_group(name) if diff is not None else None
                for j, blob in enumerate(layer.blobs):
                    g.create_dataset(str(j), data=blob.data)
                    if gd is not None:
                        gd.create_dataset(str(j), data=blob.diff)


def load_hdf5(net, path):
    """Copy ``data/<layer>/<i>`` datasets into the net's layers of the same name (Caffe's
    ``CopyTrainedLayersFromHDF5``). Each dataset's shape and type are checked before it is read."""
    h5py = _h5py()
    path = os.fspath(path)
    with file_errors(path, "not a readable HDF5 weights file", NetError):
        with h5py.File(path, "r") as f:
            data = f.get("data")
            if not isinstance(data, h5py.Group):
                raise NetError("%s: no group 'data' (HDF5 weights hold data/<layer>/<i>)" % path)
            for name in data:
                if name not in net._layer_names:
                    log.info("Ignoring source layer %s", name)
                    continue
                layer = net.layers[net._layer_names.index(name)]
                group = data[name]
                if not isinstance(group, h5py.Group) or len(group) != len(layer.blobs):
                    raise NetError("%s: incompatible number of blobs for layer %s" % (path, name))
                for j, blob in enumerate(layer.blobs):
                    ds = group.get(str(j))
                    if not isinstance(ds, h5py.Dataset) or ds.dtype.kind not in "fiub":
                        raise NetError("%s: layer '%s' param %d: not a numeric dataset data/%s/%d"
                                       % (path, name, j, name, j))
                    if tuple(ds.shape) != tuple(blob.shape):
                        raise ShapeError("%s: layer '%s' param %d: shape %s does not match %s"
                                         % (path, name, j, ds.shape, blob.shape))
                    blob.data[...] = ds[()]
