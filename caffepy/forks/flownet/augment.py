"""FlowNet 2's augmentation layers (lmb-freiburg/flownet2): DataAugmentation,
GenerateAugmentationParameters, FlowAugmentation and BlackAugmentation, CPU versions of the
fork's CUDA kernels.

An item's augmentation is an ``AugmentationCoeff`` (42 floats in the fork's field order; a field
whose default is not 0 is stored as its log, so that 0 means "no change" and coefficients add).
The spatial part maps an output pixel (x, y) to the input position

    M = T(bw/2, bh/2) Z(1/zoom_x, 1/zoom_y) T(dx cw, dy ch) R(angle) F(mirror) T(-cw/2, -ch/2)

(cw x ch the crop, bw x bh the input), read bilinearly with the position clamped to
[0, bw - 1.05] x [0, bh - 1.05] (the fork's rule: the last row / column mixes in 5 % of the one
before). Chromatic: per pixel, colours scaled by color1..3 then renormalised to the old sum,
clipped to [0, 1], raised to gamma, + brightness, contrast about 0.5, clipped to
[0, max_multiplier]. Chromatic-eigen: the batch's colour statistics in the basis
``chromatic_eigvec``, per-axis power / add / multiply, saturation and lightness changes, colour
rotation (the fork's ChromaticEigenAugmentation, step by step). Effects: the shadow half-plane and
Gaussian noise (fog and motion blur have no kernel in the fork and change nothing).

Random coefficients are drawn only in TRAIN or with ``augment_during_test``; at test time a
DataAugmentation without a coefficient bottom is a centre crop followed by the mean subtraction.
"""
import numpy as np

from ...errors import ShapeError
from .augment_math import (NUM_PARAMS, array_to_coeffs, chromatic, chromatic_eigen,
                            coeffs_to_array, discount, effects, eigen_space, generate,
                            kinds_to_generate, rng_generate, spatial_sample, steps_needed,
                            transform_matrix)
from ...layers.base import Layer, register_layer

__all__ = ["NUM_PARAMS", "array_to_coeffs", "coeffs_to_array", "transform_matrix"]


@register_layer("DataAugmentation")
class DataAugmentationLayer(Layer):
    """FlowNet 2's DataAugmentation: crop / warp, colour changes and the data mean.

    With ``crop_width`` and ``crop_height``: per item, coefficients from bottom[1] (another
    layer's), or drawn (TRAIN or ``augment_during_test``) from the generator fields, else none
    (a centre crop); then the spatial, chromatic-eigen, chromatic and effect steps of the module
    doc, each only where an item's coefficients ask for it. Without a crop: a copy.
    Mean (after augmentation): with ``recompute_mean`` R, blobs = [iteration (1,1,1,1),
    per-pixel mean (1, C, ch, cw), per-channel mean (1, C, 1, 1)]; while the iteration count
    (incremented by every forward, in any phase, as in the fork) is <= R the running mean takes the
    batch average; then the per-pixel (``mean_per_pixel: true``) or per-channel mean is
    subtracted. Otherwise 3 ``mean`` values with ``mean_per_pixel: false`` are subtracted per
    channel. No backward (as the fork).

    prototxt: ``augmentation_param { crop_width crop_height max_multiplier: 255
    augment_during_test: false recompute_mean: 0 mean_per_pixel: true mean chromatic_eigvec
    <RandomGeneratorParameter fields> }``, ``coeff_schedule_param { half_life: 1 initial_coeff: 1
    final_coeff: 1 }``. Bottoms: data (N, C, H, W) [, coefficients (N, 42, 1, 1)].
    Tops: data (N, C, ch, cw) [, the coefficients used (N, 42, 1, 1)].
    """
    min_bottom_blobs, max_bottom_blobs = 1, 2
    min_top_blobs, max_top_blobs = 1, 2

    def layer_setup(self, bottom, top):
        aug = self.layer_param.augmentation_param
        self.aug = aug
        if not self.blobs:
            n = 3 if aug.recompute_mean else 1
            self.blobs = [self.new_blob((1, 1, 1, 1))] + [self.new_blob(()) for _ in range(n - 1)]
            params = self.layer_param.param
            while len(params) < n:
                params.add()
            for spec in params[:n]:
                spec.lr_mult, spec.decay_mult = 0.0, 0.0
        self.param_propagate_down = [False] * len(self.blobs)
        self.kinds = kinds_to_generate(aug, self.phase)
        if "eigen" in self.kinds and len(aug.chromatic_eigvec) != 9:
            raise self.error("chromatic-eigen augmentation needs 9 chromatic_eigvec values")

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W", ShapeError)
        N, C, H, W = bottom[0].shape
        aug = self.aug
        self.crop = aug.HasField("crop_width") and aug.HasField("crop_height")
        ch, cw = (aug.crop_height, aug.crop_width) if self.crop else (H, W)
        if ch > H or cw > W:
            raise self.error("crop %dx%d is larger than the input %dx%d" % (ch, cw, H, W),
                             ShapeError)
        if len(bottom) > 1 and bottom[1].shape != (N, NUM_PARAMS, 1, 1):
            raise self.error("coefficient bottom must be %s, got %s"
                             % ((N, NUM_PARAMS, 1, 1), bottom[1].shape), ShapeError)
        top[0].reshape(N, C, ch, cw)
        if len(top) > 1:
            top[1].reshape(N, NUM_PARAMS, 1, 1)
        if aug.recompute_mean:
            if len(self.blobs) != 3:
                raise self.error("recompute_mean needs 3 blobs (iteration, mean, channel mean)")
            mean, per_channel = self.blobs[1], self.blobs[2]
            if mean.shape != (1, C, ch, cw):     # the fork's adjust_blobs for another size
                chan = (mean.data.reshape(1, C, -1).mean(axis=2) if aug.mean_per_pixel
                        and mean.count and mean.count % C == 0 else
                        per_channel.data.reshape(1, C) if per_channel.count == C
                        else np.zeros((1, C)))
                mean.reshape(1, C, ch, cw)
                mean.data[...] = chan.reshape(1, C, 1, 1)
                per_channel.reshape(1, C, 1, 1)
                per_channel.data[...] = chan.reshape(1, C, 1, 1)

    def adopt_source_blob(self, j, bp):
        """Weights of another crop size (the fork's adjust_blobs): a per-pixel mean becomes its
        per-channel average over the crop (with ``mean_per_pixel``; else the per-channel blob,
        copied next, is used). True when ``bp`` was taken."""
        from ...blob import Blob
        if j != 1 or len(self.blobs) != 3:
            return False
        src = Blob((), dtype=np.float64)
        src.from_proto(bp)
        C = self.blobs[1].shape[1]
        if src.count % C:
            return False
        if self.layer_param.augmentation_param.mean_per_pixel:
            chan = src.data.reshape(C, -1).mean(axis=1)
            self.blobs[1].data[...] = chan.reshape(1, C, 1, 1)
            self.blobs[2].data[...] = chan.reshape(1, C, 1, 1)
        return True

    def _coefficients(self, bottom, N, sizes):
        if len(bottom) > 1:
            return [array_to_coeffs(bottom[1].data[i].ravel()) for i in range(N)]
        out = []
        schedule = discount(self.layer_param.coeff_schedule_param,
                            float(self.blobs[0].data.flat[0]))
        for _ in range(N):
            c = array_to_coeffs(np.zeros(NUM_PARAMS))
            out.append(generate(self.aug, c, schedule, self.rng(), sizes, self.kinds)
                       if self.crop else c)
        return out

    def forward_cpu(self, bottom, top):
        aug, x = self.aug, bottom[0].data
        N, C, H, W = x.shape
        ch, cw = top[0].shape[2:]
        self.blobs[0].data.flat[0] += 1
        num_iter = float(self.blobs[0].data.flat[0])
        coeffs = self._coefficients(bottom, N, (W, H, cw, ch))
        y = top[0].data
        if self.crop:
            needs = [steps_needed(c) for c in coeffs]
            space = None
            if any(n[1] for n in needs):
                if C != 3 or len(aug.chromatic_eigvec) != 9:
                    raise self.error("chromatic-eigen augmentation needs 3 channels and 9 "
                                     "chromatic_eigvec values")
                space = eigen_space(x.astype(np.float64), aug.chromatic_eigvec)
            for i, c in enumerate(coeffs):
                out = spatial_sample(x[i], transform_matrix(c, cw, ch, W, H), ch, cw)
                if (needs[i][0] or needs[i][1] or needs[i][2]) and C != 3:
                    raise self.error("colour and effect augmentations need 3 channels, got %d" % C)
                if needs[i][1]:
                    out = chromatic_eigen(out, c, space, aug.max_multiplier)
                if needs[i][0]:
                    out = chromatic(out, c, aug.max_multiplier)
                if needs[i][2]:
                    out = effects(out, c, aug.max_multiplier, self.rng())
                y[i] = out
        else:
            y[...] = x
        if len(top) > 1:
            top[1].data[...] = np.stack([coeffs_to_array(c) for c in coeffs]).reshape(top[1].shape)
        if aug.recompute_mean:
            mean, per_channel = self.blobs[1].data, self.blobs[2].data
            if num_iter <= aug.recompute_mean:
                mean[...] = (mean * (num_iter - 1) + y.mean(axis=0, keepdims=True)) / num_iter
                per_channel[...] = mean.mean(axis=(2, 3), keepdims=True)
            y -= mean if aug.mean_per_pixel else per_channel
        elif len(aug.mean) == 3 and not aug.mean_per_pixel:
            y -= np.asarray(aug.mean, dtype=y.dtype).reshape(1, 3, 1, 1)


@register_layer("GenerateAugmentationParameters")
class GenerateAugmentationParametersLayer(Layer):
    """FlowNet 2's GenerateAugmentationParameters: coefficients for a second image.

    ``mode``: "add" (default: the incoming coefficients plus new random ones), "replace" (new
    spatial coefficients replace the incoming ones) or "regenerate" (fresh coefficients; also
    when the only bottom is an image). Random values only in TRAIN or with
    ``augment_during_test``; otherwise the incoming coefficients pass (or zeros: no change).
    The discount schedule counts this layer's own forwards.

    prototxt: ``augmentation_param { mode: "add" crop_width crop_height bottomwidth bottomheight
    num <generator fields> }``, ``coeff_schedule_param``. Bottoms: coefficients (N, 42, 1, 1)
    [, original data, augmented data (their sizes give bottom and crop sizes)], or one image.
    Top: coefficients (N, 42, 1, 1).
    """
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        if len(bottom) not in (1, 3):
            raise self.error("takes 1 or 3 bottoms (coefficients [, original, augmented data])")
        self.aug = self.layer_param.augmentation_param
        self.kinds = kinds_to_generate(self.aug, self.phase)
        self.num_iter = 0

    def reshape(self, bottom, top):
        aug = self.aug
        self.mode = aug.mode
        b0 = bottom[0].shape + (1,) * (4 - bottom[0].num_axes)
        if len(bottom) == 1 and (b0[2] > 1 or b0[3] > 1):
            self.mode = "regenerate"
        if self.mode not in ("add", "replace", "regenerate"):
            raise self.error("mode must be add, replace or regenerate, got '%s'" % self.mode)
        if len(bottom) == 3:
            self.sizes = (bottom[1].shape[3], bottom[1].shape[2], bottom[2].shape[3],
                          bottom[2].shape[2])
        else:
            if not (aug.HasField("crop_width") and aug.HasField("crop_height")):
                raise self.error("needs crop_width and crop_height without data bottoms")
            if b0[2] > 1 or b0[3] > 1:
                bw, bh = b0[3], b0[2]
            elif aug.HasField("bottomwidth") and aug.HasField("bottomheight"):
                bw, bh = aug.bottomwidth, aug.bottomheight
            else:
                raise self.error("needs bottomwidth and bottomheight without an image bottom")
            self.sizes = (bw, bh, aug.crop_width, aug.crop_height)
        if "spatial" in self.kinds and min(self.sizes) < 1:
            raise self.error("spatial augmentation needs the bottom and crop sizes")
        if self.mode != "regenerate" and bottom[0].count != b0[0] * NUM_PARAMS:
            raise self.error("coefficient bottom must be (N, %d, 1, 1), got %s"
                             % (NUM_PARAMS, bottom[0].shape), ShapeError)
        top[0].reshape(b0[0], NUM_PARAMS, 1, 1)

    def forward_cpu(self, bottom, top):
        self.num_iter += 1
        d = discount(self.layer_param.coeff_schedule_param, self.num_iter)
        N = top[0].shape[0]
        out = top[0].data.reshape(N, NUM_PARAMS)
        zero = array_to_coeffs(np.zeros(NUM_PARAMS))
        for i in range(N):
            c = (array_to_coeffs(bottom[0].data.reshape(N, -1)[i])
                 if self.mode in ("add", "replace") else dict(zero))
            if "spatial" in self.kinds:
                if self.mode == "replace":
                    c.update({n: zero[n] for n in ("mirror", "dx", "dy", "angle", "zoom_x",
                                                   "zoom_y")})
                generate(self.aug, c, d, self.rng(), self.sizes, {"spatial"})
            row = coeffs_to_array(c)
            for kind in ("chromatic", "eigen", "effect"):
                if kind in self.kinds:
                    if self.mode == "add":      # new values added to the array
                        row = row + coeffs_to_array(generate(self.aug, dict(zero), d, self.rng(),
                                                             self.sizes, {kind}))
                    else:
                        row = coeffs_to_array(generate(self.aug, c, d, self.rng(), self.sizes,
                                                       {kind}))
            out[i] = row


@register_layer("FlowAugmentation")
class FlowAugmentationLayer(Layer):
    """FlowNet 2's FlowAugmentation: the ground-truth flow under the two images' transforms.

    For output pixel (x, y): p1 = M1 (x, y) (image 1's map), the flow f read at the rounded p1
    (nearest: int(p + 0.5)), p2 = M2^-1 (p1 + f) with M2 image 2's map; out = p2 - (x, y).

    prototxt: ``augmentation_param { crop_width crop_height }`` (both required).
    Bottoms: flow (N, 2, H, W), coefficients of image 1 and image 2 (N, 42, 1, 1).
    Top: flow (N, 2, crop_height, crop_width).
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        aug = self.layer_param.augmentation_param
        if aug.crop_width < 1 or aug.crop_height < 1:
            raise self.error("augmentation_param needs crop_width and crop_height")
        self.cw, self.ch = int(aug.crop_width), int(aug.crop_height)

    def reshape(self, bottom, top):
        N = bottom[0].shape[0]
        if bottom[0].num_axes != 4 or bottom[0].shape[1] != 2:
            raise self.error("flow must be N x 2 x H x W, got %s" % (bottom[0].shape,), ShapeError)
        for b in bottom[1:]:
            if b.count != N * NUM_PARAMS:
                raise self.error("coefficient bottoms must be (N, %d, 1, 1), got %s"
                                 % (NUM_PARAMS, b.shape), ShapeError)
        top[0].reshape(N, 2, self.ch, self.cw)

    def forward_cpu(self, bottom, top):
        flow = bottom[0].data
        N, _, H, W = flow.shape
        y, x = np.mgrid[0:self.ch, 0:self.cw].astype(np.float64)
        for i in range(N):
            c1 = array_to_coeffs(bottom[1].data.reshape(N, -1)[i])
            c2 = array_to_coeffs(bottom[2].data.reshape(N, -1)[i])
            m1 = transform_matrix(c1, self.cw, self.ch, W, H).astype(np.float32)
            m2 = np.linalg.inv(transform_matrix(c2, self.cw, self.ch, W, H)).astype(np.float32)
            x1 = (x * m1[0, 0] + y * m1[0, 1] + m1[0, 2]).astype(np.float32)
            y1 = (x * m1[1, 0] + y * m1[1, 1] + m1[1, 2]).astype(np.float32)
            xi = np.clip((x1 + 0.5).astype(np.int64), 0, W - 1)   # C truncation, kept in range
            yi = np.clip((y1 + 0.5).astype(np.int64), 0, H - 1)
            x2, y2 = x1 + flow[i, 0, yi, xi], y1 + flow[i, 1, yi, xi]
            top[0].data[i, 0] = x2 * m2[0, 0] + y2 * m2[0, 1] + m2[0, 2] - x
            top[0].data[i, 1] = x2 * m2[1, 0] + y2 * m2[1, 1] + m2[1, 2] - y


@register_layer("BlackAugmentation")
class BlackAugmentationLayer(Layer):
    """FlowNet 2's BlackAugmentation: random black frames and black borders (in every phase, as
    the fork; ``rng_generate`` of the module doc, discount 1).

    Per item: if ``black`` draws true, every 3-channel top becomes the last 3-channel bottom's
    image and every 2-channel (flow) top 0; else if ``border`` draws b != 0, a random one of
    (left / right, top / bottom, both) borders of int(b W) columns / int(b H) rows is zeroed in
    every top; else a copy. (Where the fork leaves the chosen image's own top unwritten in the
    black case, this copies it.) No backward.

    prototxt: ``black_augmentation_param { black { RandomGeneratorParameter } border { ... } }``.
    Bottoms / tops: k blobs (N, 2 or 3, H, W) of one N, H, W.
    """
    min_bottom_blobs = 1
    equal_num_bottom_top_blobs = True

    def reshape(self, bottom, top):
        n, h, w = bottom[0].shape[0], bottom[0].shape[2], bottom[0].shape[3]
        for b, t in zip(bottom, top):
            if b.num_axes != 4 or b.shape[1] not in (2, 3) or (b.shape[0], b.shape[2],
                                                             b.shape[3]) != (n, h, w):
                raise self.error("bottoms must be N x 2 or 3 x H x W of one N, H, W", ShapeError)
            t.reshape(b.shape)

    def forward_cpu(self, bottom, top):
        p = self.layer_param.black_augmentation_param
        rng = self.rng()
        N, _, H, W = bottom[0].shape
        imgs = [b for b in bottom if b.shape[1] == 3]
        for n in range(N):
            xs = [b.data[n].copy() for b in bottom]
            if p.HasField("black") and rng_generate(p.black, 1.0, rng, 0.0):
                for t, b in zip(top, bottom):
                    t.data[n] = imgs[-1].data[n] if b.shape[1] == 3 and imgs else 0.0
                continue
            border = rng_generate(p.border, 1.0, rng, 0.0) if p.HasField("border") else 0.0
            if border != 0.0:
                kind = int(rng.integers(0, 3))
                bw = int(border * W) if kind in (0, 2) else 0
                bh = int(border * H) if kind in (1, 2) else 0
                keep = np.zeros((H, W), dtype=bool)
                keep[bh:max(H - bh, bh), bw:max(W - bw, bw)] = True
                xs = [np.where(keep, x, 0.0) for x in xs]
            for t, x in zip(top, xs):
                t.data[n] = x
