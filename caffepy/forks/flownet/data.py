"""FlowNet 2's CustomData (lmb-freiburg/flownet2): one LMDB Datum per sample holding several
images and flow fields stacked in the channels, split into tops and decoded per slice."""
import bisect

import numpy as np

from ...data.datum import parse_datum
from ...data.db import open_db
from ...errors import CaffeError, ShapeError
from ...layers.base import Layer, register_layer


def decode_custom_datum(d, slices, encodings, what):
    """The fork's DecodeData: a Datum's channels as float64 (C, H, W). ``slices``: channel
    [start, end) pairs; per slice UINT8 (1 byte a value), UINT16FLOW (little-endian int16 / 32;
    32767 = NaN) or BOOL1 (one bit a pixel, LSB first, one channel)."""
    C, H, W = d.channels, d.height, d.width
    if d.float_data:
        if encodings:
            raise CaffeError("%s: encoded slices must be stored as uint8 bytes, this Datum holds "
                             "float_data" % what)
        a = np.asarray(d.float_data, dtype=np.float64)
        if a.size != C * H * W:
            raise CaffeError("%s: %d float values for %dx%dx%d" % (what, a.size, C, H, W))
        return a.reshape(C, H, W)
    raw, pos, out = bytes(d.data), 0, []
    from ...proto import caffe_pb2
    dp = caffe_pb2.DataParameter
    for i, (c0, c1) in enumerate(slices):
        n, kind = (c1 - c0) * H * W, encodings[i] if i < len(encodings) else dp.UINT8
        if kind == dp.UINT8:
            size = n
        elif kind == dp.UINT16FLOW:
            size = 2 * n
        elif kind == dp.BOOL1:
            if c1 - c0 != 1:
                raise CaffeError("%s: a BOOL1 slice holds one channel, got %d" % (what, c1 - c0))
            size = (H * W - 1) // 8 + 1
        else:
            raise CaffeError("%s: invalid encoding %d for slice %d" % (what, kind, i))
        chunk = raw[pos:pos + size]
        if len(chunk) != size:
            raise CaffeError("%s: the Datum's data ends inside slice %d (%d bytes, need %d more)"
                             % (what, i, len(raw), pos + size - len(raw)))
        pos += size
        if kind == dp.UINT8:
            part = np.frombuffer(chunk, np.uint8).astype(np.float64)
        elif kind == dp.UINT16FLOW:
            v = np.frombuffer(chunk, "<i2").astype(np.float64)
            part = np.where(v == 32767, np.nan, v / 32.0)
        else:
            part = np.unpackbits(np.frombuffer(chunk, np.uint8), bitorder="little")[:H * W]
            part = part.astype(np.float64)
        out.append(part.reshape(c1 - c0, H, W))
    if pos != len(raw):
        raise CaffeError("%s: the Datum holds %d bytes, its slices %d" % (what, len(raw), pos))
    return np.concatenate(out)


@register_layer("CustomData")
class CustomDataLayer(Layer):
    """FlowNet 2's CustomData: samples of an LMDB, each Datum's channels split at
    ``slice_point`` into one top each (plus the label when there is one more top).

    Order: entry indices 0..E-1, kept where the ``preselection_file`` (one label a line) equals
    ``preselection_label``, then ``range_start`` .. ``range_end`` and an optional permutation
    (``rand_permute``, seeded by ``rand_permute_seed``, per ``block_size`` block leaving each
    block's last entry in place, as the fork; ``rand_permute_order`` picks range or permutation
    first). The permutation is numpy's, not glibc's ``random_shuffle``: the same kind of order, not
    the same one. Index i reads the first key >= ``"%08d" % i``. Values: decoded per slice
    (``encoding``, see :func:`decode_custom_datum`), then (x - mean) * ``scale``, the mean from
    ``mean_file`` (1 x C x H x W) or ``subtract`` (a value for each of the first channels).

    prototxt: ``data_param { source backend: LMDB batch_size slice_point encoding subtract
    mean_file scale preselection_file preselection_label range_start: 0 range_end: -1
    rand_permute: false rand_permute_seed rand_permute_order block_size }``; ``crop_size``,
    ``rand_skip`` and LevelDB are refused, as the fork does.
    Tops: (batch, slice channels, H, W) per slice [, label (batch, 1, 1, 1)].
    """
    exact_num_bottom_blobs = 0
    min_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.data_param
        if p.backend != p.LMDB:
            raise self.error("CustomData reads LMDB only (as the fork)")
        if p.crop_size or p.rand_skip:
            raise self.error("crop_size and rand_skip are not supported (as the fork)")
        if p.batch_size < 1:
            raise self.error("data_param.batch_size must be positive")
        points = list(p.slice_point)
        if len(top) not in (len(points) + 1, len(points) + 2):
            raise self.error("%d tops for %d slices (one per slice, optionally the label)"
                             % (len(top), len(points) + 1))
        self.labels = len(top) == len(points) + 2
        try:
            self.db = open_db(p.source, p.LMDB)
        except CaffeError as e:
            raise self.error(str(e))
        cur = self.db.cursor()
        self.keys = []
        while cur.valid:
            self.keys.append(bytes(cur.key))
            cur.next()
        cur.close()
        if not self.keys:
            raise self.error("LMDB %s is empty" % p.source)
        self.order = self._order(p, len(self.keys))
        first = self._datum(0)
        C, self.hw = first.channels, (first.height, first.width)
        bounds = [0] + points + [C]
        if any(b >= a for a, b in zip(bounds[1:], bounds[:-1])):
            raise self.error("slice_point %s must increase within (0, %d)" % (points, C))
        self.slices = list(zip(bounds[:-1], bounds[1:]))
        self.mean = np.zeros((C,) + self.hw)
        if p.mean_file:
            from ..video.data import _load_mean
            m = _load_mean(p.mean_file)
            if m.size != self.mean.size:
                raise self.error("mean_file has %d values, a Datum %d" % (m.size, self.mean.size))
            self.mean = m.reshape(self.mean.shape)
        elif p.subtract:
            if len(p.subtract) > C:
                raise self.error("%d subtract values for %d channels" % (len(p.subtract), C))
            self.mean[:len(p.subtract)] = np.asarray(p.subtract).reshape(-1, 1, 1)
        self.pos = 0

    def _order(self, p, entries):
        idx = list(range(entries))
        if p.preselection_file:
            try:
                with open(p.preselection_file) as f:
                    marks = [int(t) for t in f.read().split()]
            except (OSError, ValueError) as e:
                raise self.error("cannot read preselection_file %s: %s" % (p.preselection_file, e))
            if len(marks) != entries:
                raise self.error("the database has %d entries, preselection_file %d labels"
                                 % (entries, len(marks)))
            idx = [i for i, m in zip(idx, marks) if m == p.preselection_label]
        if not idx:
            raise self.error("no entries are selected")
        start = min(max(p.range_start, 0), len(idx) - 1)
        end = len(idx) - 1 if p.range_end < 0 or p.range_end >= len(idx) else p.range_end
        if end < start:
            raise self.error("range_end is before range_start")
        rng = np.random.default_rng(p.rand_permute_seed if p.rand_permute_seed > 0 else None)

        def permute(v):
            block = p.block_size or len(v)
            for b in range(0, len(v), block):
                part = v[b:min(b + block, len(v)) - (1 if p.block_size else 0)]
                rng.shuffle(part)
                v[b:b + len(part)] = part
            return v
        if p.rand_permute_order == p.FIRST_PERMUTE_THEN_RANGE:
            idx = (permute(idx) if p.rand_permute else idx)[start:end + 1]
        else:
            idx = idx[start:end + 1]
            idx = permute(idx) if p.rand_permute else idx
        return idx

    def _datum(self, i):
        k = bisect.bisect_left(self.keys, b"%08d" % self.order[i])
        if k == len(self.keys):
            raise self.error("no key >= %08d in %s" % (self.order[i],
                                                       self.layer_param.data_param.source))
        return parse_datum(self.db.get(self.keys[k]), "%s key %s" % (self.name, self.keys[k]))

    def reshape(self, bottom, top):
        n = self.layer_param.data_param.batch_size
        for t, (c0, c1) in zip(top, self.slices):
            t.reshape((n, c1 - c0) + self.hw)
        if self.labels:
            top[-1].reshape(n, 1, 1, 1)

    def forward_cpu(self, bottom, top):
        p = self.layer_param.data_param
        for b in range(p.batch_size):
            if self.pos >= len(self.order):
                self.pos = 0
            d = self._datum(self.pos)
            self.pos += 1
            if (d.channels,) + (d.height, d.width) != self.mean.shape:
                raise self.error("a Datum of %dx%dx%d after one of %s" % (
                    d.channels, d.height, d.width, self.mean.shape), ShapeError)
            x = (decode_custom_datum(d, self.slices, list(p.encoding), self.name) - self.mean) \
                * p.scale
            for t, (c0, c1) in zip(top, self.slices):
                t.data[b] = x[c0:c1]
            if self.labels:
                top[-1].data[b] = d.label

    def backward_cpu(self, top, propagate_down, bottom):
        """Data: no gradient."""
