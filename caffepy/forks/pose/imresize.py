"""ImResize of CMU-Perceptual-Computing-Lab/caffe_rtpose (src/caffe/cpm/layers/imresize_layer.cu)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


def _cubic(v0, v1, v2, v3, t):
    """The fork's Catmull-Rom cubic (a = -0.5) through v1 (t = 0) and v2 (t = 1)."""
    return ((-0.5 * v0 + 1.5 * v1 - 1.5 * v2 + 0.5 * v3) * t ** 3
            + (v0 - 2.5 * v1 + 2.0 * v2 - 0.5 * v3) * t ** 2 + (-0.5 * v0 + 0.5 * v2) * t + v1)


def _taps(n_out, n_in, pad):
    """Per output position: the 4 source indices (into the padded axis) and the fraction."""
    src = (np.arange(n_out) - (n_out / float(n_in) / 2 - 0.5)) * (n_in / float(n_out))
    i1 = np.maximum(np.trunc(src + 1e-5).astype(np.int64), 0)
    frac = src - i1
    i0 = np.where(i1 - 1 < 0, i1, i1 - 1)
    i2 = np.minimum(i1 + 1, n_in - 1)
    i3 = np.minimum(i2 + 1, n_in - 1)
    return np.stack([i0, i1, i2, i3]) + pad, frac


@register_layer("ImResize")
class ImResizeLayer(Layer):
    """Multi-scale bicubic resize and average (caffe_rtpose's ImResize, the GPU forward it runs;
    its CPU path is marked unused there). bottom[0]'s num axis holds S scales of one image, each
    scale n a centred crop, with pads p_n = floor((W // 2) (1 - start_scale + n scale_gap)) (same
    for H), of the padded input. Each crop (W - 2 p_n) x (H - 2 p_n) is resized to tw x th by the
    fork's bicubic kernel (Catmull-Rom, a = -0.5; source x = (x' - (tw / w / 2 - 0.5)) w / tw,
    neighbours clamped to the crop), and the S results are averaged:

        top[0, c] = (1 / S) sum_n bicubic(crop_n(bottom[n, c]))

    Output size: ``factor`` != 0: (H factor, W factor) (truncated); else the targets. Forward only
    (the fork's backward is NOT_IMPLEMENTED).
    prototxt: ``imresize_param { target_spatial_width: 368 target_spatial_height: 368 factor: 0
    start_scale: 1 scale_gap: 0.1 }``. Bottom: S x C x H x W. Top: 1 x C x th x tw.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be S x C x H x W, got %s" % (bottom[0].shape,),
                             ShapeError)
        p = self.layer_param.imresize_param
        S, C, H, W = bottom[0].shape
        if p.factor != 0:
            self.th, self.tw = int(H * p.factor), int(W * p.factor)
        else:
            self.th, self.tw = int(p.target_spatial_height), int(p.target_spatial_width)
        self.pads = []
        for n in range(S):
            s = 1 - p.start_scale + n * p.scale_gap
            ph, pw = int(np.floor(H // 2 * s)), int(np.floor(W // 2 * s))
            if H - 2 * ph < 1 or W - 2 * pw < 1 or ph < 0 or pw < 0:
                raise self.error("scale %d (start_scale %g, scale_gap %g) crops a %dx%d input to "
                                 "nothing or past its border" % (n, p.start_scale, p.scale_gap, H, W), ShapeError)
            self.pads.append((ph, pw))
        if self.th < 1 or self.tw < 1:
            raise self.error("output size %dx%d is empty" % (self.th, self.tw), ShapeError)
        top[0].reshape(1, C, self.th, self.tw)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.astype(np.float64)
        S, C, H, W = x.shape
        acc = np.zeros((C, self.th, self.tw))
        for n, (ph, pw) in enumerate(self.pads):
            ys, dy = _taps(self.th, H - 2 * ph, ph)
            xs, dx = _taps(self.tw, W - 2 * pw, pw)
            rows = [x[n][:, ys[i]] for i in range(4)]                      # C x th x W each
            cols = [_cubic(*[r[:, :, xs[j]] for j in range(4)], dx[None, None, :])
                    for r in rows]                                          # C x th x tw
            acc += _cubic(*cols, dy[None, :, None])
        top[0].data[...] = (acc / S)[None]
