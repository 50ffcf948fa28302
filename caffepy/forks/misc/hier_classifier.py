"""hyqneuron/caffe's hierarchical classifier layers (commit 780e9ae1): SoftmaxWithPerClassLoss
(src/caffe/layers/softmax_perclass_loss.cpp / .cu) and PerClassAccuracy
(src/caffe/layers/per_class_accuracy_layer.cpp), both driven by a classifier info file.

The classifier info file (``loss_param.classifier_info_file``,
``per_class_accuracy_param.classifier_info_file``), read as the fork reads it, one
whitespace-separated token after another: the classifier's name, the class count K, then K times
``label name prior lr_mult``; PerClassAccuracy with ``use_hierarchy`` then reads the superclass
count S and S times ``name size member_1 ... member_size`` (members are class indices). No shape
depends on the file: it is read when a forward or backward first needs it, and a missing or
malformed file is a one-line error naming it (``caffepy summary`` never reads it).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer
from ...layers.loss import FLT_MIN, _SoftmaxLossBase, ignore_label_of, reject_label_gradient


class ClassifierInfo(object):
    """The parsed classifier info file: ``name``, ``labels``, ``names``, ``priors``, ``lr_mults``
    (one per class, in file order) and, when read with ``hierarchy``, ``superclasses``: a list of
    (name, member indices)."""

    def __init__(self, path, hierarchy=False):
        self.path = path
        try:
            with open(path) as f:
                tokens = f.read().split()
        except (IOError, OSError) as e:
            raise ValueError("cannot read the classifier info file '%s': %s"
                             % (path, e.strerror or e))
        self._tokens, self._at = tokens, 0
        self.name = self._next(str, "the classifier name")
        k = self._next(int, "the class count")
        self.labels, self.names, self.priors, self.lr_mults = [], [], [], []
        for i in range(k):
            self.labels.append(self._next(int, "class %d's label" % i))
            self.names.append(self._next(str, "class %d's name" % i))
            self.priors.append(self._next(float, "class %d's prior" % i))
            self.lr_mults.append(self._next(float, "class %d's lr_mult" % i))
        self.superclasses = []
        if hierarchy:
            for i in range(self._next(int, "the superclass count")):
                name = self._next(str, "superclass %d's name" % i)
                size = self._next(int, "superclass %s's size" % name)
                if size <= 0:
                    raise ValueError("classifier info file '%s': superclass %s has no subclass"
                                     % (path, name))
                members = [self._next(int, "a member of superclass %s" % name)
                           for _ in range(size)]
                self.superclasses.append((name, members))
        del self._tokens

    def _next(self, kind, what):
        if self._at >= len(self._tokens):
            raise ValueError("classifier info file '%s' ends before %s" % (self.path, what))
        token = self._tokens[self._at]
        self._at += 1
        try:
            return kind(token)
        except ValueError:
            raise ValueError("classifier info file '%s': %s is %r, not %s"
                             % (self.path, what, token, kind.__name__))


def _read_info(layer, path, hierarchy=False):
    try:
        return ClassifierInfo(path, hierarchy)
    except ValueError as e:
        raise layer.error(str(e))


@register_layer("SoftmaxWithPerClassLoss")
class SoftmaxWithPerClassLossLayer(_SoftmaxLossBase):
    """Softmax loss whose gradient is scaled per sample by its class's lr_mult.

    p = softmax(x) over ``softmax_param.axis``; over the positions whose label is not
    ``ignore_label``:
        loss = -sum log(max(p[label], FLT_MIN)) / (count if normalize else outer)
    (0 when the divisor is 0; ``normalize`` is the legacy bool, true when unset as in the fork's
    schema (BVLC's has no default, false); ``normalization`` is not read). Backward, as the
    fork's CUDA path computes it:
        dx[n, :, s] = (p[n, :, s] - onehot(label)) * m[n] * top_diff / (count or outer)
    with m[n] = lr_mult of class ``label.flat[n]`` (the file's n-th class line, indexed by the
    label value) when ``class_specific_lr``, else 1; zero at ignored positions. (m[n] reads the
    n-th label, not sample n's first: the same for inner = 1, the fork's case.) The fork's CPU
    backward is an unfinished sketch (it multiplies by the count and drops the loss weight); its
    GPU path is the one reproduced here. With ``class_specific_lr`` every label must lie in
    [0, K) of the info file.

    The fork's LayerSetUp skips LossLayer's, so no top has a default loss weight: a prototxt gives
    ``loss_weight`` for both tops (the fork's nets give 1 and 0).

    prototxt: ``loss_param { ignore_label normalize classifier_info_file class_specific_lr }``
    (``classifier_info_file`` is required), ``softmax_param { axis }``.
    Bottoms: x (..., C at axis, ...), label (outer * inner values). Tops: loss (scalar), the
    probabilities (shape of x); exactly two.
    """
    exact_num_top_blobs = 2
    min_top_blobs = None
    max_top_blobs = None
    auto_top_blobs = False
    is_loss = False

    def layer_setup(self, bottom, top):
        lp = self.layer_param.loss_param
        if not lp.HasField("classifier_info_file"):
            raise self.error("SoftmaxWithPerClassLoss requires loss_param.classifier_info_file")
        self.ignore_label = ignore_label_of(self.layer_param)
        self.normalize = bool(lp.normalize) if lp.HasField("normalize") else True
        self.class_specific_lr = bool(lp.class_specific_lr)
        self.info = None

    def _axis_param(self):
        return self.layer_param.softmax_param.axis

    def _divisor(self):
        count = int(self.valid.sum())
        return count if self.normalize else self.outer

    def forward_cpu(self, bottom, top):
        self._softmax(bottom, top)
        nll = -np.log(np.maximum(self._label_prob(), FLT_MIN))
        div = self._divisor()
        top[0].data[...] = nll[self.valid].sum() / div if div else 0.0

    def _lr_mult(self, bottom):
        if not self.class_specific_lr:
            return np.ones(self.outer)
        if self.info is None:
            self.info = _read_info(self, self.layer_param.loss_param.classifier_info_file)
        first = bottom[1].data.reshape(-1)[:self.outer].astype(np.int64)
        k = len(self.info.lr_mults)
        bad = (first < 0) | (first >= k)
        if bad.any():
            raise self.error("label %d outside [0, %d) of the classifier info file '%s'"
                             % (first[bad][0], k, self.info.path))
        return np.asarray(self.info.lr_mults, dtype=np.float64)[first]

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down)
        if not propagate_down[0]:
            return
        d = self._prob_minus_onehot() * self.valid[:, None, :]
        d *= self._lr_mult(bottom)[:, None, None]
        div = self._divisor()
        d *= float(top[0].diff) / div if div else 0.0
        bottom[0].diff[...] = d.reshape(bottom[0].shape)


@register_layer("PerClassAccuracy")
class PerClassAccuracyLayer(Layer):
    """Per-class accuracy records: a confusion matrix and the hierarchical accuracy of the fork.

    For each position whose label y is not ``ignore_label``, over the C scores at ``axis``: the
    prediction is the first of the scores sorted descending as (score, index) pairs (a tie goes to
    the larger index); y and the prediction must be below the info file's K. Recorded, until
    :meth:`clear_records`: ``label_total[y]``, ``pred_total[pred]``, ``confusion[y, pred]``;
    with a third bottom (product ids, read at the sample index) and ``confusion_id_file`` the
    (id, y, pred) of each error, with ``probabilities_file`` (id, y, the sample's C*inner scores).

    With ``use_hierarchy`` (superclasses from the info file) and G = ``num_grades``: per
    superclass, the max, sum and mean of its members' scores; the superclasses of largest max /
    sum / mean (the first one, strictly larger than 0); then for grade g in 0..G-1 a hit is
    counted in ``hier_tp[g]`` when
        v_g >= c_g and the v_g superclass holds y,   or   v_g < c_g and pred == y,
    where v_0 = the largest sum, c_0 = score[pred], and v_g = the largest mean, c_g = score[pred]
    * g / G for g > 0. ``use_detailed_hier_accu`` also counts superclass confusion: the true
    superclass (the last one holding y; none is an error) against the largest-max one, and with
    ``hier_confusion_file`` the (id, true, predicted) superclass of each miss.

    :meth:`accuracies` gives the fork's (overall, mean per-class) accuracy of a confusion matrix,
    :meth:`hierarchical_accuracy` hier_tp / total. The fork's solver hooks that print these and
    write the tables to ``confusion_matrix_file`` (+ ".train" / ".test") and the id files are not
    reproduced: the records are the layer's attributes.

    prototxt: ``per_class_accuracy_param { top_k axis ignore_label classifier_info_file
    confusion_matrix_file confusion_id_file probabilities_file use_hierarchy
    use_detailed_hier_accu hier_confusion_file num_grades }``. Bottoms: scores, labels
    (outer * inner values) [, product ids (one per sample); required by the three record files].
    No top; no backward.
    """
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    exact_num_top_blobs = 0

    def layer_setup(self, bottom, top):
        p = self.layer_param.per_class_accuracy_param
        if not p.HasField("classifier_info_file"):
            raise self.error("per_class_accuracy_param.classifier_info_file is required")
        if p.use_detailed_hier_accu and not p.use_hierarchy:
            raise self.error("use_detailed_hier_accu needs use_hierarchy")
        self.record_ids = p.HasField("confusion_id_file")
        self.record_hier_ids = p.HasField("hier_confusion_file")
        self.record_probs = p.HasField("probabilities_file")
        if (self.record_ids or self.record_hier_ids or self.record_probs) and len(bottom) != 3:
            raise self.error("recording confusion ids or probabilities needs a third bottom "
                             "with the product ids")
        self.top_k = int(p.top_k)
        self.ignore_label = p.ignore_label if p.HasField("ignore_label") else None
        self.info = None

    def reshape(self, bottom, top):
        if bottom[1].count == 0 or self.top_k > bottom[0].count // bottom[1].count:
            raise self.error("top_k must be at most the number of classes", ShapeError)
        self.axis = bottom[0].canonical_axis_index(self.layer_param.per_class_accuracy_param.axis)
        shape = tuple(bottom[0].shape)
        self.outer = int(np.prod(shape[:self.axis], dtype=np.int64))
        self.inner = int(np.prod(shape[self.axis + 1:], dtype=np.int64))
        if self.outer * self.inner != bottom[1].count:
            raise self.needs("number of labels must match number of predictions: %d labels for "
                             "prediction shape %s at axis %d" % (bottom[1].count, shape,
                                                                 self.axis),
                             [(1, shape[:self.axis] + shape[self.axis + 1:], None)])

    def _load(self):
        p = self.layer_param.per_class_accuracy_param
        self.info = _read_info(self, p.classifier_info_file, p.use_hierarchy)
        self.grades = int(p.num_grades) if p.use_hierarchy else 0
        self.clear_records()

    def clear_records(self):
        """Reset every record (the fork does it after its hooks print them)."""
        k, s = len(self.info.labels), len(self.info.superclasses)
        self.label_total = np.zeros(k, dtype=np.int64)
        self.pred_total = np.zeros(k, dtype=np.int64)
        self.confusion = np.zeros((k, k), dtype=np.int64)
        self.hier_tp = np.zeros(self.grades, dtype=np.int64)
        self.hier_total = 0
        self.sup_label_total = np.zeros(s, dtype=np.int64)
        self.sup_pred_total = np.zeros(s, dtype=np.int64)
        self.sup_confusion = np.zeros((s, s), dtype=np.int64)
        self.confusion_ids, self.hier_confusion_ids, self.probabilities = [], [], []

    def forward_cpu(self, bottom, top):
        if self.info is None:
            self._load()
        p = self.layer_param.per_class_accuracy_param
        c = bottom[0].shape[self.axis]
        scores = bottom[0].data.reshape(self.outer, c, self.inner)
        labels = bottom[1].data.reshape(self.outer, self.inner).astype(np.int64)
        ids = bottom[2].data.reshape(-1) if len(bottom) == 3 else None
        k = len(self.info.labels)
        for i in range(self.outer):
            sample_id = int(ids[i]) if ids is not None else -1
            for j in range(self.inner):
                y = int(labels[i, j])
                if self.ignore_label is not None and y == self.ignore_label:
                    continue
                col = scores[i, :, j]
                pred = max(range(c), key=lambda q: (col[q], q))
                if not 0 <= y < k or pred >= k:
                    raise self.error("label %d / prediction %d outside the %d classes of '%s'"
                                     % (y, pred, k, self.info.path))
                self.label_total[y] += 1
                self.pred_total[pred] += 1
                self.confusion[y, pred] += 1
                if self.record_ids and y != pred:
                    self.confusion_ids.append((sample_id, y, pred))
                if self.record_probs:
                    self.probabilities.append((sample_id, y, scores[i].reshape(-1).copy()))
                if p.use_hierarchy and self.info.superclasses:
                    self._hierarchical(col, pred, y, sample_id, p.use_detailed_hier_accu)

    def _hierarchical(self, col, pred, y, sample_id, detailed):
        best = {"max": (0, 0.0), "sum": (0, 0.0), "mean": (0, 0.0)}
        for s, (_, members) in enumerate(self.info.superclasses):
            vals = [float(col[m]) for m in members]
            stats = {"max": max([0.0] + vals), "sum": sum(vals)}
            stats["mean"] = stats["sum"] / len(members)
            for key, v in stats.items():
                if v > best[key][1]:
                    best[key] = (s, v)
        holds = {key: y in self.info.superclasses[best[key][0]][1] for key in ("sum", "mean")}
        self.hier_total += 1
        top_score = float(col[pred])
        for g in range(self.grades):
            key = "sum" if g == 0 else "mean"
            cap = top_score if g == 0 else top_score * g / float(self.grades)
            if (holds[key] if best[key][1] >= cap else pred == y):
                self.hier_tp[g] += 1
        if detailed:
            true_sup = -1
            for s, (_, members) in enumerate(self.info.superclasses):
                if y in members:
                    true_sup = s
            if true_sup < 0:
                raise self.error("label %d belongs to no superclass of '%s'" % (y, self.info.path))
            pred_sup = best["max"][0]
            self.sup_confusion[true_sup, pred_sup] += 1
            self.sup_label_total[true_sup] += 1
            self.sup_pred_total[pred_sup] += 1
            if self.record_hier_ids and true_sup != pred_sup:
                self.hier_confusion_ids.append((sample_id, true_sup, pred_sup))

    @staticmethod
    def accuracies(label_total, confusion):
        """The fork's get_accu: (sum of the diagonal / sum of label_total, the mean over classes
        seen of confusion[c, c] / label_total[c]); NaN where a divisor is 0."""
        label_total = np.asarray(label_total, dtype=np.float64)
        diag = np.diag(np.asarray(confusion, dtype=np.float64))
        seen = label_total > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            overall = diag.sum() / label_total.sum()
            mean = (diag[seen] / label_total[seen]).sum() / seen.sum()
        return float(overall), float(mean)

    def hierarchical_accuracy(self):
        """hier_tp[g] / hier_total for each grade (NaN before any record)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.hier_tp / float(self.hier_total)
