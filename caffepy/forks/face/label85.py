"""JoeFannie/Label85's (caffe-master) TriVerLoss and TxtFeatData, its V1 types TRIVER_LOSS and
TXTFEAT_DATA: a triplet verification loss with a margin taken from the batch, and a reader of
precomputed feature vectors. (Its TRIPLET_LOSS is happynear's TripletLoss,
:mod:`caffepy.forks.face.happynear`.)
"""
import numpy as np

from ... import common
from ...data.state import ListLoaderState
from ...errors import CaffeError, ShapeError
from ...layers.base import LossLayer, register_layer
from ...layers.data import BasePrefetchingDataLayer


@register_layer("TriVerLoss")
class TriVerLossLayer(LossLayer):
    """Triplet verification loss (JoeFannie/Label85, caffe-master/src/caffe/layers/
    triver_loss_layer.cpp). The batch of 3n feature rows holds anchors, then positives, then
    negatives (labels: positive = anchor's, negative != anchor's, checked). With
    ap_i = ||a_i - p_i||^2, an_i = ||a_i - n_i||^2 and M = k m0:

        loss = sum_i (ap_i + max(M - an_i, 0)) / (2 * 3n)
        dL/da_i = s (n_i - p_i) where M - an_i > 1e-9, else s (a_i - p_i);  dL/dp_i = s (p_i - a_i)
        dL/dn_i = s (a_i - n_i) where M - an_i > 1e-9, else 0;   s = lamda g / (3n)

    (lamda times the loss's derivative, M held fixed). m0 is the fork's threshold search as it
    runs: ap of the first triplet whose an exceeds its ap, else ap of the first triplet.
    prototxt: ``triver_loss_param { k: 1 lamda: 0.0002 }``. Bottoms: features 3n x C (x 1 x 1),
    labels 3n. Top: loss.
    """

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        n3 = bottom[0].shape[0]
        if n3 % 3 or bottom[0].count_range(2) != 1 or bottom[1].count != n3:
            raise self.error("features must be 3n x C x 1 x 1 with 3n labels, got %s and %s"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)

    def forward_cpu(self, bottom, top):
        n3 = bottom[0].shape[0]
        n = n3 // 3
        f = bottom[0].data.reshape(n3, -1)
        lab = bottom[1].data.reshape(-1)
        if np.any(lab[:n] != lab[n:2 * n]) or np.any(lab[:n] == lab[2 * n:]):
            raise self.error("labels: positives must share the anchor's label, negatives not")
        a, p, ng = f[:n], f[n:2 * n], f[2 * n:]
        ap, an = ((a - p) ** 2).sum(1), ((a - ng) ** 2).sum(1)
        first = np.nonzero(an > ap)[0]
        m = self.layer_param.triver_loss_param.k * ap[first[0] if first.size else 0]
        hinge = np.maximum(m - an, 0)
        self.active = (hinge > 1e-9)[:, None]
        self.rows = (a, p, ng)
        top[0].data[...] = (ap + hinge).sum() / n3 / 2

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the labels")
        if propagate_down[0]:
            a, p, ng = self.rows
            s = self.layer_param.triver_loss_param.lamda * float(top[0].diff) / (3 * len(a))
            da = np.where(self.active, ng - p, a - p)
            dn = np.where(self.active, a - ng, 0)
            g = np.concatenate([da, p - a, dn]) * s
            bottom[0].diff[...] = g.reshape(bottom[0].shape)


class _FeatLoader(ListLoaderState):
    def __init__(self, layer):
        p = layer.layer_param.txtfeat_data_param
        self.p, self.dtype, self.what = p, layer.dtype, layer.describe()
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))
        self.read_lines(p.source, 6, "'<file> x1 y1 x2 y2 <label>'")
        self.labels = {}
        for line in self.lines:
            try:
                self.labels[line] = int(line[5])
            except ValueError:
                raise CaffeError("%s: label %r is not an integer" % (p.source, line[5]))
        self.max_label = max(self.labels.values())
        if p.shuffle:
            self.shuffle_lines()
        self.pos = int(self.rng.integers(0, p.rand_skip)) if p.rand_skip else 0
        if self.pos >= len(self.lines):
            raise CaffeError("rand_skip %d leaves no line of %d" % (self.pos, len(self.lines)))

    def data_shape(self):
        return (int(self.p.batch_size), int(self.p.feat_dim), 1, 1)

    def _read(self, name):
        path, dim = self.p.root_folder + name, int(self.p.feat_dim)
        try:
            if self.p.b_binary_file:
                v = np.fromfile(path, dtype="<f4", count=dim)
            else:
                with open(path) as f:
                    v = np.array([float(t) for t in f.readline().split()[:dim]], np.float32)
        except OSError as e:
            raise CaffeError("cannot read feature file %s: %s" % (path, e))
        if v.size < dim:
            raise CaffeError("feature file %s holds %d of %d values" % (path, v.size, dim))
        return v

    def _disturb(self, label):
        alpha = self.p.dislab_alpha
        if alpha < 1e-6:
            return label
        inv = int(np.ceil(1.0 / alpha))
        if int(self.rng.integers(0, inv + 2)) > inv:
            return int(self.rng.integers(0, self.max_label + 1))
        return label

    def load_batch(self, buf):
        for b in range(self.data_shape()[0]):
            line = self.lines[self.pos]
            buf["data"][b, :, 0, 0] = self._read(line[0])
            buf["label"][b] = self._disturb(self.labels[line])
            self.pos += 1
            if self.pos >= len(self.lines):
                self.pos = 0
                if self.p.shuffle:
                    self.shuffle_lines()


@register_layer("TxtFeatData")
class TxtFeatDataLayer(BasePrefetchingDataLayer):
    """Precomputed feature vectors and labels (JoeFannie/Label85, caffe-master/src/caffe/layers/
    txt_feat_data_layer.cpp). ``source`` lines: ``<file> x1 y1 x2 y2 <label>`` (the four numbers
    are read and not used); each file under ``root_folder`` holds ``feat_dim`` values, as raw
    little-endian float32 (``b_binary_file: true``) or whitespace-separated on its first line.
    With ``dislab_alpha`` a > 0, a label is replaced by a uniform draw in [0, the largest label]
    with probability 1 / (ceil(1 / a) + 2) (label disturbance, caffepy's generator).
    ``shuffle`` shuffles at the start and at each wrap; ``rand_skip`` skips a random number of
    lines first. prototxt: ``txtfeat_data_param { source root_folder batch_size feat_dim
    b_binary_file shuffle rand_skip dislab_alpha }`` (mean_file is not read by the fork).
    Tops: data (batch_size x feat_dim x 1 x 1), label (batch_size).
    """
    exact_num_top_blobs = 2
    min_top_blobs = 2

    def prefetch_count(self):
        return 2

    def make_loader(self, top):
        p = self.layer_param.txtfeat_data_param
        if p.batch_size < 1 or p.feat_dim < 1:
            raise self.error("txtfeat_data_param: batch_size and feat_dim must be positive")
        try:
            return _FeatLoader(self)
        except CaffeError as e:
            raise self.error(str(e))
