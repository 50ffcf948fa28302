"""R-C3D's (VisionLearningGroup/R-C3D) layers: temporal activity detection on 3-D conv features.

* ``TwinProposalLayer``: the fork's ``rpn.proposal_layer.ProposalLayer``, a Python layer giving
  temporal proposals ("twins", segments ``[x1, x2]`` in frames) from the 3-D RPN. R-C3D kept
  py-faster-rcnn's module and class names, so this is one of the stand-ins for that name, chosen
  by its form: 2 bottoms (no ``im_info``), 5-D.
* ``TemporalROIPoolingLayer``: its caffe3d ``ROIPooling`` (a variant of the Fast R-CNN layer,
  chosen when ``roi_pooling_param`` has ``pooled_l``): max pooling of each segment of a
  ``N x C x L x H x W`` blob.
"""
import numpy as np

from ..detection.frcnn import boxes
from ..detection.frcnn.config import Section
from ..detection.roi import roi_bins
from ...layers.base import Layer as BaseLayer, register_variant
from ...layers.python_layer import Layer
from ...layers.stand_ins import StandInForm

BASE_SIZE = 8
SCALES = tuple(range(1, 64))


def twin_anchors(scales=SCALES, base_size=BASE_SIZE):
    """``A x 2`` segments: the base ``[0, base_size - 1]`` scaled by each scale about its centre."""
    centre = 0.5 * (base_size - 1)
    lengths = base_size * np.asarray(scales, dtype=np.float64)
    return np.stack([centre - 0.5 * (lengths - 1), centre + 0.5 * (lengths - 1)], axis=1)


def twin_transform_inv(twins, deltas):
    """Apply ``(dx, dl)`` rows to ``[x1, x2]`` rows (see :class:`TwinProposalLayer`)."""
    length = twins[:, 1] - twins[:, 0] + 1.0
    centre = twins[:, 0] + 0.5 * length
    c = deltas[:, 0] * length + centre
    with np.errstate(over="ignore"):
        w = np.exp(deltas[:, 1]) * length
    return np.stack([c - 0.5 * w, c + 0.5 * w], axis=1)


def nms_1d(twins, scores, thresh):
    """Greedy 1-D NMS, best score first; indices kept (see :class:`TwinProposalLayer`)."""
    lengths = twins[:, 1] - twins[:, 0] + 1.0
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    keep = []
    while order.size:
        i, rest = order[0], order[1:]
        keep.append(i)
        inter = np.maximum(0.0, np.minimum(twins[i, 1], twins[rest, 1])
                           - np.maximum(twins[i, 0], twins[rest, 0]) + 1)
        order = rest[inter / (lengths[i] + lengths[rest] - inter) <= thresh]
    return np.asarray(keep, dtype=np.int64)


def propose_twins(scores, deltas, anchors, feat_stride, pre_nms_top_n, post_nms_top_n,
                  nms_thresh, min_size):
    """Proposals ``(R x 2, R)`` of one clip from its ``2A x L x 1 x 1`` scores and deltas."""
    a, length = anchors.shape[0], scores.shape[1]
    shifts = np.arange(length) * feat_stride
    shifted = (anchors[None, :, :] + shifts[:, None, None]).reshape(-1, 2)
    fg = scores[a:].transpose(1, 2, 3, 0).reshape(-1)
    d = deltas.transpose(1, 2, 3, 0).reshape(-1, 2).astype(np.float64)
    props = np.clip(twin_transform_inv(shifted, d), 0, length * feat_stride - 1)
    keep = np.where(props[:, 1] - props[:, 0] + 1 >= min_size)[0]
    props, fg = props[keep], fg[keep]
    order = np.argsort(-fg, kind="stable")
    if pre_nms_top_n > 0:
        order = order[:pre_nms_top_n]
    props, fg = props[order], fg[order]
    keep = nms_1d(props, fg, nms_thresh)
    if post_nms_top_n > 0:
        keep = keep[:post_nms_top_n]
    return props[keep], fg[keep]


def default_config():
    rpn = dict(RPN_NMS_THRESH=0.7, RPN_MIN_SIZE=8)
    return Section(TRAIN=Section(rpn, RPN_PRE_NMS_TOP_N=12000, RPN_POST_NMS_TOP_N=2000),
                   TEST=Section(rpn, RPN_PRE_NMS_TOP_N=6000, RPN_POST_NMS_TOP_N=300))


cfg = default_config()


def twin_shapes_problem(num_anchors, shapes):
    """Why bottoms of these ``shapes`` are not ``N x 2A x L x 1 x 1`` scores and deltas, or None."""
    a = num_anchors
    if (len(shapes) < 2 or any(len(s) != 5 or s[1] != 2 * a or s[3] * s[4] != 1
                               for s in shapes[:2]) or shapes[0][2] != shapes[1][2]):
        return ("%d anchors need N x %d x L x 1 x 1 scores and twin deltas, got %s"
                % (a, 2 * a, " and ".join(str(tuple(s)) for s in shapes[:2])))
    return None


def _twin_shapes_fit(param_str, shapes):
    try:
        params = boxes.parse_param_str(param_str)
    except ValueError as e:
        return str(e)
    return twin_shapes_problem(len(params.get("scales", SCALES)), shapes)


class TwinProposalLayer(Layer):
    """R-C3D's ``rpn.proposal_layer.ProposalLayer``: temporal proposals of a clip.

        layer { type: "Python" bottom: "rpn_cls_prob_reshape" bottom: "rpn_twin_pred"
                top: "rpn_rois"                                  # top: "scores" optional
                python_param { module: "rpn.proposal_layer" layer: "ProposalLayer"
                               param_str: "'feat_stride': 8 \\n'scales': !!python/tuple [2, 4]" } }

    Bottoms: ``scores`` ``N x 2A x L x H x W`` (background probabilities in the first A
    channels, activity in the last A) and ``twin deltas`` ``N x 2A x L x H x W`` (``dx, dl`` per
    anchor), with ``H = W = 1`` (the anchors move along the length axis only). For each clip:

    * anchors: the base segment ``[0, 7]`` (centre ``c = 3.5``) scaled by each of ``scales``:
      ``[c - (8 s - 1) / 2, c + (8 s - 1) / 2]``, shifted by ``l * feat_stride`` for each of the
      L cells (rows ordered ``(l, anchor)``);
    * decoding: length ``w = x2 - x1 + 1``, centre ``x1 + w / 2``; ``centre' = dx w + centre``,
      ``w' = exp(dl) w``, segment ``[centre' - w' / 2, centre' + w' / 2]``;
    * clipped to ``[0, L * feat_stride - 1]``; segments shorter than ``RPN_MIN_SIZE`` frames
      (``x2 - x1 + 1``) dropped; the best ``RPN_PRE_NMS_TOP_N`` by activity score kept; 1-D NMS
      (a segment is dropped when ``inter / (w_i + w_j - inter)``, ``inter = min x2 - max x1 + 1``,
      with a kept one is above ``RPN_NMS_THRESH``, as the fork's default GPU NMS); the best
      ``RPN_POST_NMS_TOP_N`` kept.

    Tops: ``rois`` ``R x 3`` ``[clip index, x1, x2]`` (setup: ``1 x 3``) and ``scores``
    ``R x 1`` (setup: ``1 x 1 x 1 x 1 x 1``). R-C3D takes one clip; here each clip of the batch
    is processed in turn. ``param_str``: ``feat_stride`` (required), ``scales`` (default
    ``1, 2, ..., 63``). Settings (the fork's ``lib/tdcnn/config.py``, :data:`cfg`, TRAIN or TEST
    by phase): pre-NMS 12000 / 6000, post-NMS 2000 / 300, NMS 0.7, min size 8; the experiment
    files override some (``experiments/*/td_cnn_end2end.yml``: ActivityNet TEST NMS 0.9 and min
    size 0, Charades TEST min size 0): change ``cfg`` in place before building the net for those.
    No gradient flows back.
    """

    stand_in_form = StandInForm("R-C3D", bottoms=2, tops=(1, 2), shapes=_twin_shapes_fit,
                                note="N x 2A x L x 1 x 1 scores and twin deltas for A anchors "
                                     "(63 unless param_str has scales)")

    def setup(self, bottom, top):
        params = boxes.parse_param_str(self.param_str)
        self.feat_stride = boxes.feat_stride(self, params)
        self.anchors = twin_anchors(params.get("scales", SCALES))
        self.settings = dict(cfg[boxes.phase_key(self.phase)])
        problem = twin_shapes_problem(len(self.anchors), [b.data.shape for b in bottom])
        if problem:
            raise ValueError("TwinProposalLayer: " + problem)
        top[0].reshape(1, 3)
        if len(top) > 1:
            top[1].reshape(1, 1, 1, 1, 1)

    def reshape(self, bottom, top):
        pass

    def forward(self, bottom, top):
        s = self.settings
        rois, scores = [], []
        for n in range(bottom[0].data.shape[0]):
            props, fg = propose_twins(bottom[0].data[n], bottom[1].data[n], self.anchors,
                                      self.feat_stride, s["RPN_PRE_NMS_TOP_N"],
                                      s["RPN_POST_NMS_TOP_N"], s["RPN_NMS_THRESH"],
                                      s["RPN_MIN_SIZE"])
            rois.append(np.hstack([np.full((len(props), 1), n), props]))
            scores.append(fg)
        rois = np.vstack(rois)
        boxes.write_proposals(top, rois, scores)

    def backward(self, top, propagate_down, bottom):
        pass


def _has_pooled_l(layer_param):
    p = layer_param.roi_pooling_param
    return "pooled_l" in p.DESCRIPTOR.fields_by_name and p.HasField("pooled_l")


def _c_round(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


#: The spatial window R-C3D's ROIPooling pools, rows and columns ``[0, SPATIAL_END]``: fixed in
#: the fork's kernels (its ``spatial_scale`` is read and not used).
SPATIAL_END = 6


@register_variant("ROIPooling", _has_pooled_l)
class TemporalROIPoolingLayer(BaseLayer):
    """R-C3D's caffe3d ``ROIPooling``: max pooling of each segment of a clip's features.

    Bottoms: features ``N x C x L x H x W``, rois ``R x 3`` ``[clip index, x1, x2]`` (from
    :class:`TwinProposalLayer`). Segment on the length axis: ``s = round(x1 * temporal_scale)``,
    ``e = round(x2 * temporal_scale)`` (C rounding), size ``max(e - s + 1, 1)``; rows and columns
    are always ``[0, 6]`` (as the fork's kernels); bin ``b = size / pooled``, bin ``p`` covers
    ``[floor(p b), ceil((p + 1) b)) + s`` clipped to the blob; an empty bin gives 0. Top:
    ``R x C x pooled_l x pooled_h x pooled_w``. Backward (the fork's GPU kernel; its CPU one has
    none) routes each output's gradient to its argmax; none flows to the rois.

    prototxt: ``roi_pooling_param { pooled_l pooled_h pooled_w (all required > 0)
    temporal_scale: 1 spatial_scale: 1 (unused) }``.
    """

    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.roi_pooling_param
        self.pooled = (int(p.pooled_l), int(p.pooled_h), int(p.pooled_w))
        self.temporal_scale = float(p.temporal_scale)
        if min(self.pooled) <= 0:
            raise self.error("roi_pooling_param pooled_l, pooled_h and pooled_w must be > 0 "
                             "(got %d, %d, %d)" % self.pooled)

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 5:
            raise self.error("bottom[0] must be N x C x L x H x W, got %s" % (bottom[0].shape,))
        if bottom[1].count_range(1) != 3:
            raise self.error("bottom[1] (rois) must be R x 3 [clip_index x1 x2], got %s"
                             % (bottom[1].shape,))
        top[0].reshape(bottom[1].shape[0], bottom[0].shape[1], *self.pooled)

    def _bins(self, start, end, pooled, limit):
        return roi_bins(self.dtype, start, end, pooled, limit)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        n, c, length, height, width = x.shape
        rois = bottom[1].data.reshape(-1, 3)
        out = top[0].data
        out[...] = 0
        self._argmax = np.full(out.shape, -1, dtype=np.int64)
        hs, he = self._bins(0, SPATIAL_END, self.pooled[1], height)
        ws, we = self._bins(0, SPATIAL_END, self.pooled[2], width)
        for r, roi in enumerate(rois):
            b = int(roi[0])
            if not 0 <= b < n:
                raise self.error("roi clip index %d outside [0, %d)" % (b, n))
            s, e = (int(v) for v in _c_round(roi[1:] * self.dtype.type(self.temporal_scale)))
            ls, le = self._bins(s, e, self.pooled[0], length)
            for i, j, k in np.ndindex(*self.pooled):
                if le[i] <= ls[i] or he[j] <= hs[j] or we[k] <= ws[k]:
                    continue
                patch = x[b, :, ls[i]:le[i], hs[j]:he[j], ws[k]:we[k]]
                at = patch.reshape(c, -1).argmax(axis=1)
                out[r, :, i, j, k] = patch.reshape(c, -1)[np.arange(c), at]
                dl, dh, dw = np.unravel_index(at, patch.shape[1:])
                self._argmax[r, :, i, j, k] = (((ls[i] + dl) * height + hs[j] + dh) * width
                                               + ws[k] + dw)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            bottom[1].diff[...] = 0
        if not propagate_down[0]:
            return
        n, c = bottom[0].shape[:2]
        diff = np.zeros((n, c, bottom[0].count_range(2)), dtype=np.float64)
        valid = self._argmax >= 0
        roi, ch = np.nonzero(valid)[:2]
        clip = bottom[1].data.reshape(-1, 3)[:, 0].astype(np.int64)
        np.add.at(diff, (clip[roi], ch, self._argmax[valid]), top[0].diff[valid])
        bottom[0].diff[...] = diff.reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0
