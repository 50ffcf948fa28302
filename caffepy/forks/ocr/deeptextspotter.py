"""DeepTextSpotter's Caffe (MichalBusta/caffe, branch ``darknet``): its 2-bottom ``CTCLoss``.

It keeps ChWick's type name, so it is a variant chosen per layer (``register_variant``): a
CTCLoss with 2 bottoms (ChWick's ``ctc.CTCLossLayer`` takes 3).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import register_variant
from .warpctc import _WarpCTC


@register_variant("CTCLoss", lambda lp: len(lp.bottom) == 2)
class DeepTextSpotterCTCLossLayer(_WarpCTC):
    """warp-ctc loss over T x N x 1 x C scores (MichalBusta/caffe, branch darknet,
    src/caffe/layers/ctc_loss_layer.cpp; warp-ctc's CPU code in include/caffe/util/ctc).

    Blank = class 0; every sequence lasts T; the labelling of sequence n is the entries > 0 of
    row n of the labels, in order (0 and negative entries are padding). With y = softmax(x)
    over C and warp-ctc's rules (see ``warpctc``; a labelling with U + repeats > T costs 0, zero
    gradient):
        loss = sum_n cost_n / N;   dx = (y - posterior) / N * dL
    The fork writes dx in its forward pass and leaves its backward empty, so it ignores the loss
    weight; dL (the top diff) equals it at the default loss weight 1.

    The fork hands the blob's memory to warp-ctc as T x N x C with T = shape 0, N = shape 1,
    C = shape 3: with H = shape 2 > 1 only the first T N C values are read (and get a gradient;
    the rest get 0), as here.

    No prototxt fields. Bottoms: scores (T, N, H, C), H = 1 in DeepTextSpotter's use (its
    Transpose of the N x C x 1 x T conv output; T x N x C also taken), labels (N, L). Top: the
    loss ().
    """
    exact_num_bottom_blobs = 2

    def _check_scores(self, bottom):
        shape = bottom[0].shape
        if len(shape) not in (3, 4):
            raise self.error("scores must be T x N x H x C (or T x N x C), got %s" % (shape,),
                             ShapeError)
        return shape[0], shape[1], shape[-1]

    def reshape(self, bottom, top):
        super(DeepTextSpotterCTCLossLayer, self).reshape(bottom, top)
        self.blank = 0
        if bottom[1].num_axes < 2 or bottom[1].shape[0] != self.N:
            raise self.error("labels must be N x L with N = %d, got %s" % (self.N, bottom[1].shape),
                             ShapeError)

    def forward_cpu(self, bottom, top):
        T, N = self.T, self.N
        x = bottom[0].data.reshape(-1)[:T * N * self.C].reshape(T, N, self.C)
        lab = bottom[1].data.reshape(N, -1)
        targets = [[int(v) for v in row if v > 0] for row in lab]
        costs = self._costs(x, np.full(N, T), targets)
        self.grad /= N
        top[0].data[...] = costs.sum() / N

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot propagate to the labels")
        if propagate_down[0]:
            d = bottom[0].diff.reshape(-1)
            d[...] = 0
            d[:self.grad.size] = self.grad.reshape(-1) * float(top[0].diff)
