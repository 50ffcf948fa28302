"""JoeFannie/Label85's (caffe-master) TriVerLoss, TxtFeatData and FaceImage, its V1 types
TRIVER_LOSS, TXTFEAT_DATA and FACE_IMAGE: a triplet verification loss with a margin taken from
the batch, a reader of precomputed feature vectors and a reader of face crops. (Its TRIPLET_LOSS
is happynear's TripletLoss, :mod:`caffepy.forks.face.happynear`.)
"""
import numpy as np

from ... import common
from ...data.image import read_image, resize_bilinear
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


class _FaceLoader(ListLoaderState):
    """The fork's FaceImageLayer list walk and DataTransformer::FaceImageTransform."""

    def __init__(self, layer):
        p = layer.layer_param.face_image_param
        self.p, self.tp, self.dtype = p, layer.layer_param.transform_param, layer.dtype
        self.what, self.train = layer.describe(), layer.phase == layer._caffe_pb2.TRAIN
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))
        self.read_lines(p.source, 6, "'<image> x1 y1 x2 y2 <label>'")
        self.info = {}
        for line in self.lines:
            try:
                self.info[line] = ([int(v) for v in line[1:5]], int(line[5]))
            except ValueError:
                raise CaffeError("%s: centres and label must be integers: %s" % (p.source,
                                                                                " ".join(line)))
        if p.shuffle:
            self.shuffle_lines()
        self.pos = int(self.rng.integers(0, p.rand_skip)) if p.rand_skip else 0
        if self.pos >= len(self.lines):
            raise CaffeError("rand_skip %d leaves no line of %d" % (self.pos, len(self.lines)))
        img = self._image(self.lines[self.pos])
        tp = self.tp
        h, w = img.shape[:2]
        if h < tp.crop_height or w < tp.crop_width:
            raise CaffeError("image %s (%dx%d) is smaller than the crop"
                             % (self.lines[self.pos][0], h, w))
        self.shape = (int(p.batch_size), img.shape[2], tp.crop_height or h, tp.crop_width or w)
        self.mean = np.asarray(tp.mean_value, np.float64)

    def data_shape(self):
        return self.shape

    def _image(self, line):
        return read_image(self.p.root_folder + line[0], is_color=False)

    def _rand(self, n):
        return int(self.rng.integers(0, n)) if n > 0 else 0

    def _transform(self, img, xy):
        tp, train = self.tp, self.train
        mirror = tp.mirror and (self._rand(2) if train else True)
        cx, cy = (xy[2], xy[3]) if mirror else (xy[0], xy[1])
        _, c, height, width = self.shape
        ih, iw = img.shape[:2]
        cw, ch = tp.crop_width, tp.crop_height
        if cw * ch:
            if train:
                cx += -tp.rand_shift + self._rand(2 * tp.rand_shift + 1)
                cy += -tp.rand_shift + self._rand(2 * tp.rand_shift + 1)
                ch += -tp.rand_s_height + self._rand(2 * tp.rand_s_height + 1)
                cw += -tp.rand_s_width + self._rand(2 * tp.rand_s_width + 1)
            h0, w0 = cy - int(ch / 2), cx - int(cw / 2)
            h1, w1 = cy + int(ch / 2), cx + int(cw / 2)
            bottom, right = max(h1 - ih, 0), max(w1 - iw, 0)
            top, left = max(-h0, 0), max(-w0, 0)
            crop = img[max(h0, 0):min(h1, ih), max(w0, 0):min(w1, iw)]
            crop = np.pad(crop, [(top, bottom), (left, right), (0, 0)], mode="reflect")
            img = resize_bilinear(crop, height, width)
            if train and tp.rand_noise and self._rand(2):
                alpha = np.float32((150.0 - self._rand(101)) / 100.0)
                beta = int((50 - self._rand(101)) + 100 - 100 * alpha)
                v = np.clip(np.trunc(img.astype(np.float32) * alpha + beta), 0, 255)
                noise = tp.rand_noise - self.rng.integers(0, 2 * tp.rand_noise + 1, v.shape)
                img = np.clip(np.trunc(v * alpha + beta + noise), 0, 255).astype(np.uint8)
        elif (ih, iw) != (height, width):
            raise CaffeError("image is %dx%d, the batch %dx%d (set crop_width / crop_height)"
                             % (ih, iw, height, width))
        x = img.transpose(2, 0, 1).astype(np.float64)
        if mirror:
            x = x[:, :, ::-1]
        if self.mean.size:
            x = x - np.broadcast_to(self.mean, (c,))[:, None, None]
        return x * tp.scale

    def _other(self, anchor, label, same):
        n = len(self.lines)
        start = self._rand(n)
        for i in range(n):
            k = (start + i) % n
            lab = self.info[self.lines[k]][1]
            if (same and lab == label and k != anchor) or (not same and lab != label):
                return k
        if same:
            return anchor
        raise CaffeError("triplet_ver: the list has a single label")

    def _advance(self, step):
        self.pos += step
        if self.pos >= len(self.lines):
            self.pos = 0
            if self.p.shuffle:
                self.shuffle_lines()

    def load_batch(self, buf):
        n = self.shape[0]
        if self.p.triplet_ver:
            third = n // 3
            for item in range(third):
                a = self.pos
                label = self.info[self.lines[a]][1]
                nxt = (a + 1) % len(self.lines)
                if self.info[self.lines[nxt]][1] == label:
                    idx = (a, nxt, self._other(a, label, False))
                else:
                    idx = (a, self._other(a, label, True), nxt)
                for i, k in enumerate(idx):
                    xy, lab = self.info[self.lines[k]]
                    buf["data"][item + i * third] = self._transform(self._image(self.lines[k]), xy)
                    buf["label"][item + i * third] = lab
                self._advance(2)
            return
        for item in range(n):
            xy, lab = self.info[self.lines[self.pos]]
            buf["data"][item] = self._transform(self._image(self.lines[self.pos]), xy)
            buf["label"][item] = lab
            self._advance(1)


@register_layer("FaceImage")
class FaceImageLayer(BasePrefetchingDataLayer):
    """Gray face images cropped around a listed centre (JoeFannie/Label85,
    caffe-addition/src/caffe/layers/face_image_layer.cpp with DataTransformer::FaceImageTransform
    of its caffe-master). ``source`` lines: ``<image> x1 y1 x2 y2 <label>``: (x1, y1) the crop
    centre, (x2, y2) the centre used when the image is mirrored. With ``transform_param {
    crop_width crop_height }`` the crop spans 2 (crop / 2) pixels about the centre (TRAIN: the
    centre moved by up to ``rand_shift``, the size by up to ``rand_s_width`` / ``rand_s_height``),
    the part outside the image filled by reflection (BORDER_REFLECT_101), then resized
    (bilinear) to crop_width x crop_height; without a crop the image must have the batch's size.
    TRAIN with ``rand_noise``: half the time a random contrast / brightness change, applied
    twice (the second time with per-pixel noise), as the fork does. ``mirror``: TRAIN flips at
    random, TEST always. Then (x - mean_value) * scale (mean_file is refused). With
    ``face_image_param { triplet_ver: true }`` each third of the batch holds anchors, positives
    and negatives (the next line when its label fits, else a line found from a random start).
    prototxt: ``face_image_param { source root_folder batch_size shuffle rand_skip triplet_ver }``.
    Tops: data (batch_size x 1 x h x w), label (batch_size).
    """
    exact_num_top_blobs = 2
    min_top_blobs = 2

    def prefetch_count(self):
        return 2

    def make_loader(self, top):
        p = self.layer_param.face_image_param
        if p.batch_size < 1 or (p.triplet_ver and p.batch_size % 3):
            raise self.error("face_image_param: batch_size must be positive (and a multiple "
                             "of 3 with triplet_ver)")
        if self.layer_param.transform_param.mean_file:
            raise self.error("transform_param: mean_file is not supported here; give "
                             "mean_value")
        try:
            return _FaceLoader(self)
        except CaffeError as e:
            raise self.error(str(e))
