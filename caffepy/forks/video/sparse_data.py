"""yjxiong/caffe's SparseData (commit a7fc2b9, src/caffe/layers/sparse_data_layer.cpp): dense
blobs from a text file of sparse entries. jolibrain/caffe's SparseData (sparse datums from a
database into a sparse blob) is another layer, not built here.
"""
import re

import numpy as np

from ...errors import CaffeError
from ...layers.base import register_layer
from ...layers.data import BasePrefetchingDataLayer, _ensure

# boost::tokenizer<>'s default separators: white space and the C locale's punctuation
_SEPARATORS = re.compile(r"[\s!-/:-@\[-`{-~]+")
_LOG_THRESHOLD = 1e-20


def _atof(token):
    """C's atof of a token (no sign or point can be in one: they separate tokens)."""
    m = re.match(r"0[xX][0-9a-fA-F]+|\d+(?:[eE]\d+)?|inf(?:inity)?|nan", token, re.I)
    if not m:
        return 0.0
    text = m.group(0)
    return float(int(text, 16)) if text[:2].lower() == "0x" else float(text)


class _SparseTextLoader(object):
    def __init__(self, layer, p):
        self.what = layer.describe()
        self.path, self.n = p.source_file, int(p.batch_size)
        self.shape = (int(p.mat_channels), int(p.mat_height), int(p.mat_width))
        self.prob = bool(p.probability)
        try:
            with open(self.path, "r", encoding="utf-8", errors="surrogateescape",
                      newline="\n") as f:
                text = f.read()
        except OSError as e:
            raise CaffeError("%s: cannot open %s: %s" % (self.what, self.path, e.strerror or e))
        self.lines = text.split("\n")
        if text.endswith("\n"):
            self.lines.pop()
        if not text:
            raise CaffeError("%s: %s is empty" % (self.what, self.path))
        self.pos = 0

    def get_state(self):
        return {"pos": self.pos}

    def set_state(self, state):
        self.pos = int(state["pos"]) % len(self.lines)

    def data_shape(self):
        return (self.n,) + self.shape

    def decode(self, lineno, out):
        """One line ``id [c] [h] [w] value ...`` (a position axis left out where its size is 1)
        into ``out`` (C x H x W, zeros)."""
        tokens = [t for t in _SEPARATORS.split(self.lines[lineno]) if t]
        where = "%s: %s:%d" % (self.what, self.path, lineno + 1)
        if not tokens:
            raise CaffeError("%s: an empty line (the fork needs an id)" % where)
        c, h, w = self.shape
        axes = [size for size in (c, h, w)]
        pos_len = 1 + sum(size != 1 for size in axes)
        numbers = [_atof(t) for t in tokens[1:]]
        if len(numbers) % pos_len:
            raise CaffeError("%s: incorrect number of integers in line (%d, not a multiple of %d)"
                             % (where, len(numbers), pos_len))
        total = 0.0
        for k in range(0, len(numbers), pos_len):
            vals, at = [], k
            for size in axes:
                if size == 1:
                    vals.append(0)
                else:
                    vals.append(int(numbers[at]))
                    at += 1
            if not all(0 <= v < s for v, s in zip(vals, axes)):
                raise CaffeError("%s: position %s outside %d x %d x %d" % (where, tuple(vals),
                                                                             c, h, w))
            out[tuple(vals)] = numbers[at]
            total += numbers[at]
        if self.prob:
            out /= max(total, _LOG_THRESHOLD)

    def load_batch(self, buf):
        data = _ensure(buf, "data", self.data_shape(), buf["data"].dtype)
        data[...] = 0
        for i in range(self.n):
            self.decode(self.pos, data[i])
            self.pos = (self.pos + 1) % len(self.lines)


@register_layer("SparseData")
class SparseDataLayer(BasePrefetchingDataLayer):
    """One top, batch_size x mat_channels x mat_height x mat_width, zero but for the entries each
    line of ``source_file`` lists (one line per item, wrapping to the first line after the
    last). A line is an id, then (c, h, w, value) groups, a position axis left out where its size
    is 1, split as boost::tokenizer's default splits: at blanks and at punctuation, so "0.5" is
    the two numbers 0 and 5 and a sign is dropped; each number is atof of its token, positions
    truncated to int. A later entry at the same position overwrites it. With ``probability``
    each item is divided by the sum of its listed values (at least 1e-20). prototxt:
    ``sparse_data_param { source_file mat_height: 1 mat_width: 1 mat_channels: 1 encode_type:
    POS batch_size: 1 probability: false }``; encode_type RLE is NOT_IMPLEMENTED in the fork.
    """
    exact_num_top_blobs = 1
    min_top_blobs = max_top_blobs = None
    top_keys = ("data",)

    def prefetch_count(self):
        return 1

    def make_loader(self, top):
        if not self.layer_param.HasField("sparse_data_param"):
            raise self.error("needs sparse_data_param (yjxiong/caffe's text reader); "
                             "jolibrain/caffe's database SparseData is not built")
        p = self.layer_param.sparse_data_param
        if p.encode_type != p.POS:
            raise self.error("encode_type RLE is not implemented (NOT_IMPLEMENTED in the fork)")
        if min(p.batch_size, p.mat_channels, p.mat_height, p.mat_width) <= 0:
            raise self.error("batch_size, mat_channels, mat_height and mat_width must be > 0")
        try:
            return _SparseTextLoader(self, p)
        except CaffeError as e:
            raise e if str(e).startswith(self.describe()) else self.error(str(e))


def top_shapes(lp, batch_size=None):
    """caffepy.zoo: the top of a SparseData layer (yjxiong's form)."""
    p = lp.sparse_data_param
    n = int(batch_size) if batch_size is not None else int(p.batch_size)
    return [(n, int(p.mat_channels), int(p.mat_height), int(p.mat_width))]
