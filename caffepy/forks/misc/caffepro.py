"""yihui-he/caffe-pro (the caffe of channel-pruning): ``Filter`` with ``filter_param``, which keeps
the channels a learned selector marks (pruned nets). BVLC's Filter (items chosen by a selector
bottom) stays the default; this one is chosen per layer when ``filter_param`` is set.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_variant


@register_variant("Filter", lambda lp: lp.HasField("filter_param"))
class ChannelFilterLayer(Layer):
    """Keep the channels whose selector entry is non-zero: y = x[:, s != 0].

        s: the layer's blob of C = x.shape[axis] values (filled with ones when the layer is new;
           a pruned model's .caffemodel holds its 0/1 selector)
        top shape: x's with ``num_output`` at ``axis``; forward requires exactly num_output
        non-zero entries. dL/dx = dL/dy on the kept channels, 0 elsewhere; s gets no gradient.

    prototxt: ``filter_param { axis: 1 num_output }`` (the fork implements axis 1 of 4-D
    blobs only). Bottoms: x_0 .. x_{k-1} (N x C x H x W); one top per bottom.
    """
    min_bottom_blobs = 1
    min_top_blobs = 1

    def layer_setup(self, bottom, top):
        if len(top) != len(bottom):
            raise self.error("takes one top per bottom (%d bottoms, %d tops)"
                             % (len(bottom), len(top)))
        p = self.layer_param.filter_param
        self.axis, self.num_output = int(p.axis), int(p.num_output)
        if self.axis != 1 or bottom[0].num_axes != 4:
            raise self.error("filter_param: only axis 1 of 4-D blobs is supported (as caffe-pro), "
                             "got axis %d of shape %s" % (self.axis, bottom[0].shape))
        if not p.HasField("num_output") or self.num_output <= 0:
            raise self.error("filter_param.num_output must be positive")
        if not self.blobs:
            blob = self.new_blob((bottom[0].shape[1],))
            blob.data[...] = 1
            self.blobs = [blob]

    def reshape(self, bottom, top):
        c = self.blobs[0].count
        for i, b in enumerate(bottom):
            if b.num_axes != 4 or b.shape[1] != c:
                raise self.error("bottom[%d] shape %s: expected 4 axes and %d channels (the "
                                 "selector's size)" % (i, b.shape, c), ShapeError)
            shape = list(b.shape)
            shape[1] = self.num_output
            top[i].reshape(tuple(shape))

    def _keep(self):
        keep = np.flatnonzero(self.blobs[0].data.reshape(-1))
        if keep.size != self.num_output:
            raise self.error("the selector keeps %d channels; filter_param.num_output is %d"
                             % (keep.size, self.num_output))
        return keep

    def forward_cpu(self, bottom, top):
        self.keep = self._keep()
        for b, t in zip(bottom, top):
            t.data[...] = b.data[:, self.keep]

    def backward_cpu(self, top, propagate_down, bottom):
        for t, b, down in zip(top, bottom, propagate_down):
            if down:
                b.diff[...] = 0
                b.diff[:, self.keep] = t.diff
