"""The stereo training layers of leonzfa/iResNet (a FlowNet / DispNet Caffe): ``RandomCrop`` and
``DataSwitch``, which pick a crop and a data set for each batch of its ROB training nets. Both
compute in the fork's GPU code only (their CPU Forward returns at once); these are that code's
semantics, and neither has a backward pass (the fork's writes no gradient).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer

PAD = 128.0      # what RandomCrop writes outside the bottom, except in its last channel (NaN)


def crop_offset(bottom, target, train, rng):
    """RandomCrop's offset along one axis: TRAIN, a uniform draw from [0, bottom - target) when
    the bottom is larger (the fork's ``rand() % (b - t)``, so never b - t itself), 0 when equal;
    otherwise, and in TEST, (bottom - target) / 2 truncated towards zero (negative: the crop is
    larger than the bottom and is padded on both sides)."""
    if train and bottom > target:
        return int(rng.integers(0, bottom - target))
    if train and bottom == target:
        return 0
    return int((bottom - target) / 2)


@register_layer("RandomCrop")
class RandomCropLayer(Layer):
    """leonzfa/iResNet's RandomCrop: one crop of ``target_height`` x ``target_width`` at the same
    offset for the whole batch of its 7-channel stereo bottoms (two RGB images and a disparity).

        top[n, c, y, x] = bottom[n, c, y + oy, x + ox]   where inside the bottom,
                          128 (c < C - 1) or NaN (the last channel, the disparity) outside

    with (oy, ox) from :func:`crop_offset` (TRAIN: random, TEST: centred). No gradient.

    prototxt: ``random_crop_param { target_height: 128 target_width: 320 }`` (schema:
    proto/additions.d/stereo_random_crop.json, the fork's numbers). The bottom must have 7
    channels, as the fork checks.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "random_crop_param")
        self.height = int(p.target_height) if p is not None else 128
        self.width = int(p.target_width) if p is not None else 320
        if self.height < 1 or self.width < 1:
            raise self.error("random_crop_param target_height and target_width must be "
                             "positive, got %d x %d" % (self.height, self.width))

    def reshape(self, bottom, top):
        shape = bottom[0].shape
        if len(shape) != 4 or shape[1] != 7:
            raise self.error("RandomCrop takes an N x 7 x H x W bottom (two images and a "
                             "disparity), got %s" % (shape,), ShapeError)
        top[0].reshape((shape[0], shape[1], self.height, self.width))

    def forward_cpu(self, bottom, top):
        x, y = bottom[0].data, top[0].data
        train = self.phase == self._caffe_pb2.TRAIN
        bh, bw = x.shape[2:]
        oy = crop_offset(bh, self.height, train, self.rng())
        ox = crop_offset(bw, self.width, train, self.rng())
        y[:, :-1] = PAD
        y[:, -1] = np.nan
        ty0, tx0 = max(0, -oy), max(0, -ox)
        ty1, tx1 = min(self.height, bh - oy), min(self.width, bw - ox)
        if ty1 > ty0 and tx1 > tx0:
            y[:, :, ty0:ty1, tx0:tx1] = x[:, :, ty0 + oy:ty1 + oy, tx0 + ox:tx1 + ox]

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("DataSwitch")
class DataSwitchLayer(Layer):
    """leonzfa/iResNet's DataSwitch: the top is a copy of one bottom, drawn uniformly for each
    forward pass (the fork draws u in [0, 1] and takes the first i with u <= (i + 1) / K of K
    bottoms). The top has bottom 0's shape; every bottom must have it too. No gradient.
    No parameters (the fork's data_switch_param is commented out of its schema).
    """
    min_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        for i, b in enumerate(bottom[1:], 1):
            if b.shape != bottom[0].shape:
                raise self.error("bottom %d has shape %s, bottom 0 %s: DataSwitch copies one of "
                                 "them into a top of bottom 0's shape" % (i, b.shape,
                                                                          bottom[0].shape),
                                 ShapeError)
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        self.chosen = int(self.rng().integers(0, len(bottom)))
        top[0].data[...] = bottom[self.chosen].data

    def backward_cpu(self, top, propagate_down, bottom):
        pass
