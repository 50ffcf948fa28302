"""Human-parsing evaluation layers of Look into Person's Caffe (Betterthinking/caffe at 36001c2),
its V1 types PARSE_OUTPUT and PARSE_EVALUATE: ParseOutput (per-pixel argmax) and ParseEvaluate
(per-class counts for IoU), neither with a backward; and PcaGetCoord of ALISCIFP/Segmentation's
PCA-layer Caffe (its V1 PCA_GET_COORD), landmarks from a PCA shape model.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("ParseOutput")
class ParseOutputLayer(Layer):
    """The label of the largest score at each pixel (src/caffe/layers/parse_output_layer.cpp):
    N x C x H x W -> labels N x 1 x H x W (the first channel of equal maxima) [, the maxima
    N x 1 x H x W]. No parameters.
    """
    exact_num_bottom_blobs = 1
    min_top_blobs = 1
    max_top_blobs = 2

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W", ShapeError)
        n, _, h, w = bottom[0].shape
        for t in top:
            t.reshape((n, 1, h, w))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        top[0].data[...] = x.argmax(1)[:, None]
        if len(top) > 1:
            top[1].data[...] = x.max(1)[:, None]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            raise self.error("ParseOutput has no backward")


@register_layer("ParseEvaluate")
class ParseEvaluateLayer(Layer):
    """Per-class pixel counts (src/caffe/layers/parse_evaluate_layer.cpp). For predicted labels
    p and ground truth g (N x 1 x H x W each), over the pixels whose g is not an ignore_label:

        top[0, c, 0] = #{p = g = c};  top[0, c, 1] = #{g = c};  top[0, c, 2] = #{p = c}

    Top: 1 x num_labels x 1 x 3. prototxt: ``parse_evaluate_param { num_labels ignore_label
    (repeated) }`` (num_labels required; labels must lie below it).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.parse_evaluate_param
        if not p.HasField("num_labels") or p.num_labels < 1:
            raise self.error("parse_evaluate_param: num_labels is required")
        self.k, self.ignore = p.num_labels, set(p.ignore_label)

    def reshape(self, bottom, top):
        a, b = bottom
        if a.count != b.count or a.shape[0] != b.shape[0]:
            raise self.error("prediction %s and label %s differ" % (a.shape, b.shape),
                             ShapeError)
        top[0].reshape((1, self.k, 1, 3))

    def forward_cpu(self, bottom, top):
        pred = bottom[0].data.reshape(-1).astype(int)
        gt = bottom[1].data.reshape(-1).astype(int)
        keep = ~np.isin(gt, list(self.ignore)) if self.ignore else np.ones(gt.shape, bool)
        pred, gt = pred[keep], gt[keep]
        if pred.size and (max(pred.max(), gt.max()) >= self.k or min(pred.min(), gt.min()) < 0):
            raise self.error("labels must lie in [0, num_labels = %d)" % self.k)
        out = np.zeros((self.k, 3))
        out[:, 0] = np.bincount(gt[pred == gt], minlength=self.k)
        out[:, 1] = np.bincount(gt, minlength=self.k)
        out[:, 2] = np.bincount(pred, minlength=self.k)
        top[0].data[...] = out.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("ParseEvaluate has no backward")


@register_layer("PcaGetCoord")
class PcaGetCoordLayer(Layer):
    """Landmark coordinates from a PCA shape model and a per-image affine transform
    (ALISCIFP/Segmentation's caffe-with-pcalayer, src/caffe/layers/pca_get_coord_layer.cpp).
    Bottoms: U (t x P x 2, the shape basis), b (N x t coefficients), q (P x 2, the mean shape),
    T (N x 6, a 2 x 3 affine per image). For image i and point j:

        s_i = q + b_i U  (as P x 2);     y[i, j] = T_i [s_ij, 1]
        dL/dT_i = sum_j dL/dy_ij [s_ij, 1]^T;  dL/db_i = U (R_i^T dL/dy_i),  R_i = T_i[:, :2]

    U and q get no gradient. The fork keeps s in a parameter blob (N x P x 2, rewritten from q
    at every reshape, its diff holding dL/ds); caffepy keeps that blob, rewritten at every
    forward, so weight files carry it. Top: N x P x 2.
    """
    exact_num_bottom_blobs = 4
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        if not self.blobs:
            self.blobs = [self.new_blob(())]
        self.param_propagate_down = [False]

    def reshape(self, bottom, top):
        u, b, q, t = bottom
        if u.num_axes != 3 or u.shape[2] != 2 or q.count != u.shape[1] * 2 or \
                b.count != t.shape[0] * u.shape[0] or t.count != t.shape[0] * 6:
            raise self.error("bottoms must be t x P x 2, N x t, P x 2, N x 6; got %s"
                             % ([x.shape for x in bottom],), ShapeError)
        shape = (t.shape[0], u.shape[1], 2)
        top[0].reshape(shape)
        self.blobs[0].reshape(shape)

    def forward_cpu(self, bottom, top):
        u, b, q, t = (x.data for x in bottom)
        n = t.shape[0]
        s = q.reshape(1, -1) + b.reshape(n, -1) @ u.reshape(u.shape[0], -1)
        s = s.reshape(n, -1, 2)
        self.blobs[0].data[...] = s
        aff = t.reshape(n, 2, 3)
        top[0].data[...] = np.einsum("nij,npj->npi", aff[:, :, :2], s) + aff[:, None, :, 2]

    def backward_cpu(self, top, propagate_down, bottom):
        u, t = bottom[0].data, bottom[3].data
        n = t.shape[0]
        dy = top[0].diff.reshape(n, -1, 2)
        s = self.blobs[0].data.reshape(n, -1, 2)
        aff = t.reshape(n, 2, 3)
        ds = np.einsum("npi,nij->npj", dy, aff[:, :, :2])
        self.blobs[0].diff[...] = ds.reshape(self.blobs[0].shape)
        if propagate_down[3]:
            dt = np.concatenate([np.einsum("npi,npj->nij", dy, s), dy.sum(1)[:, :, None]], 2)
            bottom[3].diff[...] = dt.reshape(bottom[3].shape)
        if propagate_down[1]:
            db = ds.reshape(n, -1) @ u.reshape(u.shape[0], -1).T
            bottom[1].diff[...] = db.reshape(bottom[1].shape)
        for i in (0, 2):
            if propagate_down[i]:
                bottom[i].diff[...] = 0
