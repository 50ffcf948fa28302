"""DeepLab v2's weakly-supervised and I/O layers (Liang-Chieh Chen and George Papandreou's Caffe,
carried by aharley/segaware, hszhao/PSPNet, Chrisding/seal and others): SpatialProduct,
UniqueLabel, BiasChannel, AdaptiveBiasChannel, MatRead. Sources: ``src/caffe/layers/
{spatial_product,unique_label,bias_channel,adaptive_bias_channel,mat_read}_layer.cpp`` and
``src/caffe/util/matio_io.cpp`` (aharley/segaware, commit dc45b8a, directory ``caffe/``).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("SpatialProduct")
class SpatialProductLayer(Layer):
    """Scales every channel by a one-channel map: ``y[n, c, s] = x[n, c, s] * m[n, 0, s]``.

    Backward: ``dx = dy * m``; ``dm[n, 0, s] = sum_c dy[n, c, s] x[n, c, s]``.
    Bottoms: x (N x C x H x W), m (N x 1 x H x W). Top: N x C x H x W. No parameters.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        x, m = bottom
        if x.num_axes < 2:
            raise self.error("bottom 0 needs at least 2 axes, got %s" % (x.shape,), ShapeError)
        want = (x.shape[0], 1) + tuple(x.shape[2:])
        if tuple(m.shape) != want:
            raise self.needs("bottom 1 must be %s (one channel, bottom 0's num, height and "
                             "width), got %s" % (want, m.shape), [(1, want, None)])
        top[0].reshape(x.shape)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data * bottom[1].data

    def backward_cpu(self, top, propagate_down, bottom):
        x, m = bottom
        dy = top[0].diff
        if propagate_down[0]:
            x.diff[...] = dy * m.data
        if propagate_down[1]:
            m.diff[...] = np.sum(dy * x.data, axis=1, keepdims=True)


@register_layer("UniqueLabel")
class UniqueLabelLayer(Layer):
    """The sorted distinct values of each label map, padded with -1.

    Per image n: the set of values of the map (bottom N x 1 x H x W) whose integer part (C++'s
    truncation) is not an ``ignore_label``, joined with ``force_label``; written in ascending order
    into ``top[n, 0:k, 0, 0]``, the rest -1. More than ``max_labels`` values is an error.

    prototxt: ``unique_label_param { max_labels (required; > number of force_label)
    ignore_label* force_label* }``. Top: N x max_labels x 1 x 1. No backward (the fork stops
    with an error when asked to propagate to the label).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.unique_label_param
        self.ignore = np.array(sorted(set(p.ignore_label)), dtype=np.int64)
        self.force = np.array(sorted(set(p.force_label)), dtype=np.float64)
        self.max_labels = int(p.max_labels)
        if self.max_labels <= len(self.force):
            raise self.error("max_labels (%d) must exceed the number of force_label values (%d)"
                             % (self.max_labels, len(self.force)))

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4 or bottom[0].shape[1] != 1:
            raise self.error("the label must be N x 1 x H x W, got %s" % (bottom[0].shape,),
                             ShapeError)
        top[0].reshape((bottom[0].shape[0], self.max_labels, 1, 1))

    def forward_cpu(self, bottom, top):
        out = top[0].data.reshape(top[0].shape[0], -1)
        out[...] = -1
        for n, lab in enumerate(bottom[0].data.reshape(bottom[0].shape[0], -1)):
            keep = ~np.isin(np.trunc(lab).astype(np.int64), self.ignore)
            vals = np.union1d(lab[keep].astype(np.float64), self.force)
            if len(vals) > self.max_labels:
                raise self.error("image %d has %d distinct labels; max_labels is %d"
                                 % (n, len(vals), self.max_labels))
            out[n, :len(vals)] = vals

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            raise self.error("cannot backpropagate to the label input")


@register_layer("BiasChannel")
class BiasChannelLayer(Layer):
    """Adds a bias to the score channels of the labels an image (or a pixel) carries.

    ``label_type: IMAGE``: bottom 1 is N x L x 1 x 1 (a UniqueLabel list); for each entry l of
    image n (C++ int of the value) that is not -1 or an ``ignore_label``, ``y[n, l] += bg_bias``
    when l == 0, else ``fg_bias`` (a repeated label is biased again); l outside [0, C) is an
    error. ``label_type: PIXEL``: bottom 1 is N x 1 x H x W; at each pixel with a label l that is
    not ignored: with a background label (``background_label`` or ``bg_bias`` set) the background
    channel gets ``bg_bias`` and, when l is not the background, channel l gets ``fg_bias``;
    without one, channel l gets ``fg_bias``.
    Backward: ``dx = dy``; none to the label (the fork stops with an error when asked).

    prototxt: ``bias_channel_param { bg_bias: 1 fg_bias: 2 (both >= 0) ignore_label*
    label_type: IMAGE (or PIXEL) background_label: 0 }``. Top: bottom 0's shape.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.bias_channel_param
        self.bg, self.fg = float(p.bg_bias), float(p.fg_bias)
        if self.bg < 0 or self.fg < 0:
            raise self.error("bg_bias and fg_bias must be >= 0 (got %g, %g)" % (self.bg, self.fg))
        self.ignore = np.array(sorted(set(p.ignore_label) | {-1}), dtype=np.int64)
        self.has_bg = p.HasField("background_label") or p.HasField("bg_bias")
        self.bg_label = int(p.background_label)
        self.pixel = p.label_type == type(p).PIXEL

    def reshape(self, bottom, top):
        x, lab = bottom
        if x.num_axes != 4 or lab.num_axes != 4:
            raise self.error("bottoms must be 4-D, got %s and %s" % (x.shape, lab.shape),
                             ShapeError)
        N, _, H, W = x.shape
        want = (N, 1, H, W) if self.pixel else (N, lab.shape[1], 1, 1)
        if tuple(lab.shape) != want or lab.shape[1] < 1:
            raise self.needs("the %s label must be %s, got %s"
                             % ("PIXEL" if self.pixel else "IMAGE", want, lab.shape),
                             [(1, want, None)])
        top[0].reshape(x.shape)

    def _labels(self, values):
        labels = np.trunc(values).astype(np.int64)
        keep = ~np.isin(labels, self.ignore)
        return labels, keep

    def forward_cpu(self, bottom, top):
        x, lab = bottom
        N, C = x.shape[:2]
        y = top[0].data
        y[...] = x.data
        labels, keep = self._labels(lab.data.reshape(N, -1))
        bad = keep & ((labels < 0) | (labels >= C))
        if self.pixel and self.has_bg:
            bad &= labels != self.bg_label
        if bad.any():
            raise self.error("unexpected label %d (the scores have %d channels)"
                             % (labels[bad][0], C))
        dt = y.dtype.type
        for n in range(N):
            if not self.pixel:
                for label in labels[n][keep[n]]:
                    y[n, label] += dt(self.bg if label == 0 else self.fg)
                continue
            flat = y[n].reshape(C, -1)
            pos = np.flatnonzero(keep[n])
            if self.has_bg:
                flat[self.bg_label, pos] += dt(self.bg)
                pos = pos[labels[n, pos] != self.bg_label]
            flat[labels[n, pos], pos] += dt(self.fg)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the label input")
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff


@register_layer("AdaptiveBiasChannel")
class AdaptiveBiasChannelLayer(Layer):
    """Adaptive biasing of the present labels' scores (DeepLab's weakly-supervised EM-Adapt).

    Per image n with the labels present (bottom 1, N x L x 1 x 1, C++ int values; -1 skipped, a
    value outside [0, C) an error; nothing is done for an image with none), sorted:
    1. ``suppress_others``: where an absent channel's score exceeds m = the minimum over present
       channels, it becomes ``m - margin_others``.
    2. M = pointwise maximum over the present channels; mu0 = mean(M).
    3. ``num_iter`` times: the labels are shuffled (the background 0, when present, stays first)
       and for each label l in turn: ``y_l += q``, q = the element of rank floor(p * H * W)
       (0-based, ascending) of ``M - y_l``, p = ``bg_portion`` for l == 0 else ``fg_portion``;
       then ``M = max(M, y_l)``.
    4. Every channel is shifted by ``mu0 - mean(M)``.
    The fork shuffles with std::random_shuffle (C's rand); caffepy with its seeded generator, so
    with two or more foreground labels the order, and the numbers, can differ from a fork run.
    A portion whose rank is H * W (portion 1) is an error here (the fork reads past its buffer).
    Backward: none. The fork's Backward_cpu is empty (bottom diffs are not written); so here.

    prototxt: ``adaptive_bias_channel_param { num_iter: 1 (> 0) bg_portion: 0.2 fg_portion: 0.2
    (in [0, 1]) suppress_others: true margin_others: 1e-5 (>= 0) }``. Top: bottom 0's shape.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.adaptive_bias_channel_param
        self.num_iter, self.suppress = int(p.num_iter), bool(p.suppress_others)
        self.margin = np.float32(p.margin_others)
        self.bg_portion, self.fg_portion = np.float32(p.bg_portion), np.float32(p.fg_portion)
        if self.num_iter <= 0:
            raise self.error("num_iter must be positive (got %d)" % self.num_iter)
        if self.margin < 0:
            raise self.error("margin_others must be >= 0 (got %g)" % self.margin)
        for name, v in (("bg_portion", self.bg_portion), ("fg_portion", self.fg_portion)):
            if not 0 <= v <= 1:
                raise self.error("%s must be in [0, 1] (got %g)" % (name, v))
        self._rng = np.random.default_rng(int(self.rng().integers(0, 2 ** 63)))

    def reshape(self, bottom, top):
        x, lab = bottom
        if x.num_axes != 4 or x.shape[1] <= 1:
            raise self.error("the scores must be N x C x H x W with C > 1, got %s" % (x.shape,),
                             ShapeError)
        want = (x.shape[0], lab.shape[1] if lab.num_axes > 1 else 1, 1, 1)
        if tuple(lab.shape) != want or want[1] < 1:
            raise self.needs("the label list must be %s, got %s" % (want, lab.shape),
                             [(1, want, None)])
        top[0].reshape(x.shape)

    def forward_cpu(self, bottom, top):
        x, lab = bottom
        N, C, H, W = x.shape
        S = H * W
        y = top[0].data
        y[...] = x.data
        dt = y.dtype.type
        for n in range(N):
            labels = np.trunc(lab.data[n].ravel()).astype(np.int64)
            labels = labels[labels != -1]
            bad = (labels < 0) | (labels >= C)
            if bad.any():
                raise self.error("unexpected label %d (the scores have %d channels)"
                                 % (labels[bad][0], C))
            if not len(labels):
                continue
            labels = np.sort(labels)
            bg = bool(labels[0] == 0)
            s = y[n].reshape(C, S)
            present = np.isin(np.arange(C), labels)
            if self.suppress:
                low = s[present].min(axis=0)
                over = ~present[:, None] & (s > low)
                s[over] = np.broadcast_to(low - dt(self.margin), s.shape)[over]
            top_score = s[labels].max(axis=0)
            mean0 = np.mean(top_score, dtype=np.float64)
            for _ in range(self.num_iter):
                self._rng.shuffle(labels[int(bg):])
                for label in labels:
                    portion = self.bg_portion if label == 0 else self.fg_portion
                    nth = int(portion * np.float32(S))
                    if nth >= S:
                        raise self.error("a portion of 1 ranks past the %d pixels" % S)
                    s[label] += np.partition(top_score - s[label], nth)[nth]
                    np.maximum(top_score, s[label], out=top_score)
            s += dt(mean0 - np.mean(top_score, dtype=np.float64))

    def backward_cpu(self, top, propagate_down, bottom):
        """Nothing, as the fork's empty Backward_cpu."""


@register_layer("MatRead")
class MatReadLayer(Layer):
    """Reads blobs from MATLAB files (the counterpart of MatWrite).

    Sample k of the run (counted from 0 over all forwards) is read from
    ``<prefix><name>_blob_0.mat``: name = line k of ``source`` (its first word with ``strip``
    characters cut off the end; the list wraps around), or ``iter_<k>`` without a source. The file's
    variable ``data`` is a W x H x C x 1 array (MATLAB's trailing singleton axes may be dropped),
    of class single in a float32 net and double in a float64 one, as DeepLab's ``ReadBlobFromMat``
    requires; it becomes the 1 x C x H x W blob whose row-major memory is MATLAB's column-major
    memory of the array. A variable ``diff`` is not read into the top (the fork's forward copies
    data only). Top: batch_size x C x H x W, C, H, W from the first name's file at setup (the fork
    reads ``source``'s first line there, and has no name without a source; caffepy reads
    ``iter_0``); every later file must have that shape. Read with scipy.io.loadmat (MATLAB v4 to
    v7.2 files; v7.3 HDF5 files are refused with an error).

    prototxt: ``mat_read_param { prefix (required) source: "" strip: 0 batch_size: 1 (> 0) }``.
    No bottoms; one top; no backward.
    """
    exact_num_bottom_blobs = 0
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.mat_read_param
        self.prefix, self.batch, self.iter = p.prefix, int(p.batch_size), 0
        if self.batch <= 0:
            raise self.error("batch_size must be positive (got %d)" % self.batch)
        if p.strip < 0:
            raise self.error("strip cannot be negative (got %d)" % p.strip)
        self.names = None
        if p.HasField("source"):
            self.names = self._read_source(p.source, int(p.strip))
        shape = self._read(self._name(0)).shape
        self.shape = (self.batch,) + shape[1:]
        top[0].reshape(self.shape)

    def _read_source(self, path, strip):
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise self.error("cannot read source %s: %s" % (path, e.strerror))
        names = []
        for i, line in enumerate(lines):
            word = line.split()[0] if line.split() else ""
            if len(word) <= strip:
                raise self.error("%s:%d: strip %d leaves nothing of '%s'" % (path, i + 1, strip,
                                                                           word))
            names.append(word[:len(word) - strip])
        if not names:
            raise self.error("source %s lists no files" % path)
        return names

    def _name(self, k):
        if self.names is None:
            return "iter_%d" % k
        return self.names[k % len(self.names)]

    def _read(self, name):
        from scipy.io import loadmat
        path = "%s%s_blob_0.mat" % (self.prefix, name)
        try:
            mat = loadmat(path)
        except NotImplementedError:
            raise self.error("%s: MATLAB v7.3 (HDF5) files are not read; save with -v7" % path)
        except (OSError, ValueError, TypeError) as e:
            raise self.error("cannot read MAT file %s: %s" % (path, str(e).splitlines()[0]
                                                              if str(e) else type(e).__name__))
        if "data" not in mat:
            raise self.error("%s has no variable 'data'" % path)
        a = mat["data"]
        if a.dtype != self.dtype:
            raise self.error("%s: 'data' is %s; a %s net reads %s" % (
                path, a.dtype, self.dtype, "single" if self.dtype == np.float32 else "double"))
        if a.ndim > 4:
            raise self.error("%s: 'data' has %d dimensions (at most 4)" % (path, a.ndim))
        blob = a.reshape(a.shape + (1,) * (4 - a.ndim)).T
        if blob.shape[0] != 1:
            raise self.error("%s: 'data' holds %d samples (its 4th dimension); MatRead reads one"
                             % (path, blob.shape[0]))
        return blob

    def reshape(self, bottom, top):
        pass

    def forward_cpu(self, bottom, top):
        for n in range(self.batch):
            name = self._name(self.iter)
            blob = self._read(name)
            if blob.shape[1:] != self.shape[1:]:
                raise self.error("%s%s_blob_0.mat holds %s; the top is %s" % (
                    self.prefix, name, blob.shape[1:], self.shape[1:]), ShapeError)
            top[0].data[n] = blob[0]
            self.iter += 1

    def backward_cpu(self, top, propagate_down, bottom):
        """No gradient."""
