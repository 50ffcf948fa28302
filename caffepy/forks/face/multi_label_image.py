"""happynear/caffe-windows' MultiLabelImageData (src/caffe/layers/multi_label_image_data_layer.cpp;
also Aliang-SEU/MTCNN-on-caffe-window and Centerus/caffe-windows): ImageData with a row of float
labels per image.
"""
import re

import numpy as np

from ...errors import CaffeError
from ...layers.base import register_layer
from ...layers.data import BasePrefetchingDataLayer, _ensure
from ...layers.data_image import _ImageListLoader

_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(inf|nan)", re.I)


def read_multi_label_list(path):
    """[(path, [labels])] as the fork reads its list: each line (1023 characters at most) is a
    file name then numbers up to the line's end; a trailing blank (a CR included) repeats the
    last number (``stream >> label`` fails at the end and the old value is pushed again). The
    list ends at a line whose name is shorter than 3 characters or repeats the previous line's
    name. Every line must give as many labels as the first."""
    try:
        with open(path, "r", encoding="utf-8", errors="surrogateescape", newline="\n") as f:
            lines = f.read().split("\n")
    except OSError as e:
        raise CaffeError("%s: cannot open image list: %s" % (path, e.strerror or e))
    out, last, count = [], "", None
    for lineno, line in enumerate(lines, 1):
        line = line[:1023]
        words = line.split(None, 1)
        name = words[0] if words else ""
        if len(name) < 3 or name == last:
            break
        rest = line[line.index(name) + len(name):]
        labels, label = [], None
        while rest:
            body = rest.lstrip()
            if not body:                    # trailing blanks: the failed read pushes the old value
                if label is None:
                    raise CaffeError("%s:%d: trailing blank before any label: the fork pushes an "
                                     "uninitialised value" % (path, lineno))
                labels.append(label)
                break
            m = _NUMBER.match(body)
            if not m:
                raise CaffeError("%s:%d: label %r is not a number (the fork's reader would not "
                                 "stop)" % (path, lineno, body.split()[0]))
            label = float(m.group(0))
            labels.append(label)
            rest = body[m.end():]
        if count is None:
            count = len(labels)
        elif len(labels) != count:
            raise CaffeError("%s:%d: label count do not match for file: %s (%d labels, the first "
                             "line has %d)" % (path, lineno, name, len(labels), count))
        out.append((name, labels))
        last = name
    return out


class _MultiLabelLoader(_ImageListLoader):
    def __init__(self, param, transformer, what):
        super().__init__(param, transformer, what)
        self.k = len(self.lines[0][1])
        self.label_item_shape = (self.k,)
        self.cut = int(param.label_cut_start)

    def read_list(self, param):
        return read_multi_label_list(param.source)

    def load_batch(self, buf):
        items, labels = [], []
        while len(items) < self.batch_size:
            got = self._checked(items[0].shape if items else None)
            if got is not None:
                items.append(got[0])
                labels.append(got[1])
            self._advance()
        shape = (self.batch_size,) + self.transformer.infer_shape(items[0].shape)
        data = _ensure(buf, "data", shape, self.transformer.dtype)
        self.transformer.transform_arrays(items, data)
        rows = labels[self.cut:self.batch_size - self.cut]
        out = _ensure(buf, "label", (len(rows), self.k), self.transformer.dtype)
        out[...] = np.reshape(rows, out.shape)


@register_layer("MultiLabelImageData")
class MultiLabelImageDataLayer(BasePrefetchingDataLayer):
    """Images of a list file, each with K float labels (list lines ``<name> <l1> ... <lK>``, read
    as :func:`read_multi_label_list`). Tops: data (N x C x h x w, as ImageData: ``root_folder +
    name``, resized when new_height / new_width are set, ``transform_param``), labels
    (N - 2 label_cut_start) x K: the labels of items label_cut_start .. N - label_cut_start - 1
    (the fork reads label_cut_end from label_cut_start). prototxt: ``image_data_param { source
    batch_size root_folder new_height new_width is_color shuffle rand_skip label_cut_start
    balance_class balance_by }``. balance_class / balance_by change no batch (the fork builds
    per-class lists in its set-up that load_batch never reads). face_transform (the fork's random
    face warp around landmark labels) is refused. PG-CNN's form (``multi_label_image_data_param``)
    is not read: caffepy.zoo replaces that reader by inputs.
    """
    exact_num_top_blobs = 2

    def make_loader(self, top):
        if self.layer_param.HasField("multi_label_image_data_param"):
            raise self.error("multi_label_image_data_param (mysee1989/PG-CNN's reader) is not "
                             "read; caffepy reads happynear/caffe-windows' image_data_param form")
        p = self.layer_param.image_data_param
        if p.face_transform:
            raise self.error("image_data_param.face_transform (the fork's random face warp) is "
                             "not supported")
        if bool(p.new_height) != bool(p.new_width):
            raise self.error("new_height and new_width must be set together")
        if p.batch_size < 1:
            raise self.error("image_data_param.batch_size must be positive")
        if p.batch_size - 2 * p.label_cut_start < 0:
            raise self.error("label_cut_start %d leaves no label rows of a batch of %d"
                             % (p.label_cut_start, p.batch_size))
        try:
            return _MultiLabelLoader(p, self.make_transformer(p), self.describe())
        except CaffeError as e:
            raise e if str(e).startswith(self.describe()) else self.error(str(e))

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        p = self.layer_param.image_data_param
        top[1].reshape(top[0].shape[0] - 2 * int(p.label_cut_start), top[1].shape[1])
