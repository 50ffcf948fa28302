"""Net's parameters and weights I/O (a mixin of :class:`caffepy.net.Net`).

``update`` is Caffe's ``Net::Update`` (``data -= diff`` for every learnable param; the solvers
scale ``diff`` first); ``copy_from`` reads a .caffemodel (binary NetParameter, memory-mapped when
over 1 MB, packed values as views of the file's bytes, then the V0/V1 upgrade) or an .h5 file and
copies layers by name (``Net(..., weights=...)`` reads first, builds without filling the layers
the file provides, then copies);
``share_trained_layers_with`` makes params the same memory as another net's (test nets);
``save`` / ``save_hdf5`` / ``to_proto`` write them. In optimize mode (folded weights) loading and
saving are refused with a one-line error naming the mode.
"""
import os

from ..errors import CaffeError, NetError, ProtoError, ShapeError
from ..proto import caffe_pb2, io as proto_io
from .weights import copy_trained_layers, net_to_proto


class NetParams(object):
    """Needs ``learnable_params``, ``layers``, ``_layer_names``, ``name`` and ``_plan`` (and, while
    building, ``param_owners``, ``params_lr``, ``params_weight_decay``, ``param_layer_indices``,
    ``param_display_names``)."""

    # -- parameters ----------------------------------------------------------------------------
    def _append_params(self, li, layer, lp, param_by_name):
        """Caffe's ``Net::AppendParam`` for every blob of layer ``li``: its ParamSpec's lr_mult
        (0: no gradient; a negative one computes a gradient too, as net.cpp does) and decay_mult,
        and sharing by ``name`` (STRICT: same shape; PERMISSIVE: same count) with the first layer
        that named it. Returns whether any of the layer's params needs a gradient."""
        layer.param_propagate_down = [True] * len(layer.blobs)
        if len(lp.param) > len(layer.blobs):
            raise NetError("layer '%s' (%s): %d param specs for %d parameter blobs"
                           % (lp.name, lp.type, len(lp.param), len(layer.blobs)))
        any_need = False
        for k, blob in enumerate(layer.blobs):
            spec = lp.param[k] if k < len(lp.param) else caffe_pb2.ParamSpec()
            need = spec.lr_mult != 0    # Caffe (net.cpp): a negative lr_mult computes a gradient too
            layer.param_propagate_down[k] = need
            any_need |= need
            display = spec.name or str(k)
            if spec.name and spec.name in param_by_name:
                owner_idx = param_by_name[spec.name]
                owner = self.learnable_params[owner_idx]
                if spec.share_mode == caffe_pb2.ParamSpec.PERMISSIVE:
                    if owner.count != blob.count:
                        raise ShapeError("layer '%s' (%s): cannot share param '%s': count %d "
                                         "differs from the owner's %d" % (lp.name, lp.type,
                                                                          spec.name, blob.count, owner.count))
                elif owner.shape != blob.shape:
                    raise ShapeError("layer '%s' (%s): cannot share param '%s': shape %s differs from "
                                     "the owner's %s (use share_mode: PERMISSIVE to compare counts)"
                                     % (lp.name, lp.type, spec.name, blob.shape, owner.shape))
                blob.share_data(owner)
                blob.share_diff(owner)
                self.param_owners.append(owner_idx)
                if spec.HasField("lr_mult"):
                    self.params_lr[owner_idx] = spec.lr_mult
                if spec.HasField("decay_mult"):
                    self.params_weight_decay[owner_idx] = spec.decay_mult
            else:
                if spec.name:
                    param_by_name[spec.name] = len(self.learnable_params)
                self.param_owners.append(-1)
                self.learnable_params.append(blob)
                self.params_lr.append(spec.lr_mult)
                self.params_weight_decay.append(spec.decay_mult)
                self.param_layer_indices.append((li, k))
                self.param_display_names.append("%s:%s" % (lp.name, display) if not spec.name else display)
        return any_need

    def clear_param_diffs(self):
        for p in self.learnable_params:
            p.clear_diff()

    def update(self):
        """data -= diff for every learnable param (Caffe's Net::Update; solvers scale diff first).
        A param with a connectivity mask (``connectivity_mode``, caffepy.solvers.sparsity) has its
        diff multiplied by the mask first, as the SSL forks' Blob::Update does."""
        masks = getattr(self, "connectivity", None) or {}
        for pid, p in enumerate(self.learnable_params):
            if pid in masks:
                p.diff[...] *= masks[pid]
            p.data[...] -= p.diff

    def _refuse_in_optimize_mode(self, what):
        if self._plan is not None:
            raise NetError("net '%s': %s is not available in optimize mode (the weights are "
                           "folded); build the net without optimize" % (self.name, what))

    def copy_from(self, path):
        """Copy weights from a .caffemodel (binary NetParameter) or .h5, matching layers by name."""
        self._refuse_in_optimize_mode("loading weights")
        self._copy_read(read_weights(path))

    def _copy_read(self, read):
        """Copy what :func:`read_weights` returned into this net's layers."""
        path, src, values = read
        if src is None:
            from .weights import load_hdf5
            load_hdf5(self, path)
            return
        try:
            copy_trained_layers(self, src, source_name=path, values=values)
        except CaffeError as e:
            if path in str(e):
                raise
            raise type(e)("%s: %s" % (path, e)) from e

    def copy_trained_layers_from(self, net_param):
        self._refuse_in_optimize_mode("loading weights")
        copy_trained_layers(self, net_param)

    def share_trained_layers_with(self, other):
        """Make this net's parameters the same memory as ``other``'s, by layer name."""
        for name, layer in zip(other._layer_names, other.layers):
            if name not in self._layer_names or not layer.blobs:
                continue
            mine = self.layers[self._layer_names.index(name)]
            if len(mine.blobs) != len(layer.blobs):
                raise NetError("layer '%s': incompatible number of blobs (%d vs %d)"
                               % (name, len(mine.blobs), len(layer.blobs)))
            for a, b in zip(mine.blobs, layer.blobs):
                if a.shape != b.shape:
                    raise ShapeError("layer '%s': cannot share a param of shape %s with %s"
                                     % (name, a.shape, b.shape))
                a.share_data(b)

    share_with = share_trained_layers_with

    def to_proto(self, write_diff=False):
        self._refuse_in_optimize_mode("saving weights")
        return net_to_proto(self, write_diff)

    def save(self, path, write_diff=False):
        """Write a .caffemodel (binary NetParameter, float data) that BVLC Caffe reads."""
        self._refuse_in_optimize_mode("saving weights")
        from .weights import save_caffemodel
        save_caffemodel(self, path, write_diff)

    def save_hdf5(self, path, write_diff=False):
        self._refuse_in_optimize_mode("saving weights")
        from .weights import save_hdf5
        save_hdf5(self, path, write_diff)

    def load_hdf5(self, path):
        self._refuse_in_optimize_mode("loading weights")
        from .weights import load_hdf5
        load_hdf5(self, path)


def read_weights(path):
    """(path, NetParameter, packed values) of a .caffemodel, its blob values left as views of the
    file's bytes (caffepy.proto.packed); (path, None, None) for an .h5 file, read when copied."""
    path = os.fspath(path)
    if path.endswith((".h5", ".hdf5")):
        return path, None, None
    from ..proto import packed, upgrade
    raw = _map(path)
    split = packed.split_net(raw)          # blob values as views of the file's bytes
    src = caffe_pb2.NetParameter()
    proto_io.parse_binary(raw if split is None else split[0], src, filename=path)
    values = None
    if split is not None:
        names = [lp.name for lp in src.layer]
        if len(set(names)) == len(names):     # the upgrade keeps names, not indices
            values = {(names[i], j): v for (i, j), v in split[1].items()}
        else:
            proto_io.parse_binary(raw, src, filename=path)
    upgrade.upgrade_net(src, filename=path)
    return path, src, values


def provided_layers(reads):
    """Names of the layers whose blobs the :func:`read_weights` results ``reads`` hold."""
    return {lp.name for _, src, _ in reads if src is not None for lp in src.layer if len(lp.blobs)}


def _map(path):
    """The bytes of weights file ``path``: a read-only memory map for a large one (its values are
    copied once, from the page cache into the blobs), else read."""
    import mmap
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size < (1 << 20):
                return f.read()
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as e:
        raise ProtoError("%s: cannot read: %s" % (path, getattr(e, "strerror", None) or e))
