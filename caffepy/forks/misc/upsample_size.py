"""The ``Upsample`` of the ONNX-to-Caffe YOLOv5 ports (Wulingtian/yolov5_caffe's
upsample_layer.cpp): a resize to a size or by integer factors, nearest or bilinear, beside YOLO's
nearest ``scale`` Upsample and SegNet's two-bottom one (caffepy.forks.misc.vision,
caffepy.forks.segmentation.segnet); chosen for a layer other than SegNet's two-bottom form whose
``upsample_param`` sets ``height_scale`` / ``width_scale``, ``height`` / ``width`` or ``mode``.

Output size (Ho, Wo): ``height`` x ``width`` when both are set (each >= 2), else H
``height_scale`` x W ``width_scale`` (both set, each >= 2), as the fork's Reshape decides.

    NEAREST:   y[h, w] = x[floor(h H / Ho), floor(w W / Wo)]
    BILINEAR (the default): aligned corners, in the fork's float arithmetic: r = (H - 1) / (Ho - 1)
               (0 when Ho = 1), source row t = r h, h1 = floor(t), weight t - h1 on row
               min(h1 + 1, H - 1) and 1 - (t - h1) on h1; the same along the width.

Backward: the adjoint of that linear map (the fork writes no gradient; its layer is for
deployment). prototxt: ``upsample_param { height width height_scale width_scale mode:
BILINEAR|NEAREST }`` (schema: proto/additions.d/upsample_size_scale.json; ``height`` / ``width``
are the harvested fields). Bottom N x C x H x W; top N x C x Ho x Wo.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer
from ...layers.registry import register_variant

_OWN = ("height_scale", "width_scale", "mode", "height", "width")


def _sets_own_fields(lp):
    p = lp.upsample_param
    names = {f.name for f, _ in p.ListFields()}
    return len(lp.bottom) != 2 and bool(names & set(_OWN))


def _bilinear_matrix(n_out, n_in):
    """Rows: the fork's aligned-corner weights of output o over the input positions."""
    r = np.float32(n_in - 1) / np.float32(n_out - 1) if n_out > 1 else np.float32(0)
    t = (r * np.arange(n_out, dtype=np.float32)).astype(np.float32)
    lo = t.astype(np.int64)
    frac = (t - lo.astype(np.float32)).astype(np.float64)
    hi = np.where(lo < n_in - 1, lo + 1, lo)
    A = np.zeros((n_out, n_in))
    A[np.arange(n_out), lo] += 1 - frac
    A[np.arange(n_out), hi] += frac
    return A


def _nearest_matrix(n_out, n_in):
    A = np.zeros((n_out, n_in))
    A[np.arange(n_out), np.arange(n_out) * n_in // n_out] = 1.0
    return A


@register_variant("Upsample", _sets_own_fields)
class SizeScaleUpsampleLayer(Layer):
    """The YOLOv5 ports' Upsample: see the module doc."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.upsample_param
        self.size = self.scales = None
        if p.HasField("height") and p.HasField("width"):
            self.size = (int(p.height), int(p.width))
            if min(self.size) < 2:
                raise self.error("upsample_param height and width must be >= 2, got %d x %d"
                                 % self.size)
        elif p.HasField("height_scale") and p.HasField("width_scale"):
            self.scales = (int(p.height_scale), int(p.width_scale))
            if min(self.scales) < 2:
                raise self.error("upsample_param height_scale and width_scale must be >= 2, "
                                 "got %d and %d" % self.scales)
        else:
            raise self.error("Upsample needs upsample_param height and width, or height_scale "
                             "and width_scale")
        self.nearest = p.mode == p.NEAREST

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W, got %s" % (bottom[0].shape,),
                             ShapeError)
        n, c, h, w = bottom[0].shape
        ho, wo = self.size or (h * self.scales[0], w * self.scales[1])
        make = _nearest_matrix if self.nearest else _bilinear_matrix
        self.Ah = make(ho, h).astype(self.dtype)
        self.Aw = make(wo, w).astype(self.dtype)
        top[0].reshape((n, c, ho, wo))

    def forward_cpu(self, bottom, top):
        top[0].data[...] = np.matmul(np.matmul(self.Ah, bottom[0].data), self.Aw.T)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = np.matmul(np.matmul(self.Ah.T, top[0].diff), self.Aw)
