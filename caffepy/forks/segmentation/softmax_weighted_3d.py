"""yulequan/3D-Caffe's SoftmaxWithWeightedLoss: SoftmaxWithLoss with a weight per class read
from a text file."""
import os

import numpy as np

from ...layers.base import _shapes_only, register_layer
from ...layers.loss import FLT_MIN, SoftmaxWithLossLayer, reject_label_gradient


@register_layer("SoftmaxWithWeightedLoss")
class SoftmaxWithWeightedLossLayer(SoftmaxWithLossLayer):
    """Softmax loss with class weights (yulequan/3D-Caffe,
    src/caffe/layers/softmax_weighted_loss_layer.cpp; PeterZs/DeepLearningLearningSession
    registers the type too). With p = softmax(x) over ``axis``, l the label at each position and
    w_c the weight of class c:

        W = sum over the counted positions of w_l
        loss = -sum w_l log(max(p_l, FLT_MIN)) / norm
        dL/dx = loss_weight w_l (p - onehot(l)) / norm   (0 at ignored positions)

    norm as SoftmaxWithLoss's normalizer, except that VALID counts int(W) (the fork passes the
    weight sum where the count of labels goes, truncated to an int), at least 1. This is the
    fork's CPU path; its GPU path normalises VALID by W only with an ignore_label, else by the
    number of positions. prototxt: ``loss_param { weight_source: "w.txt" ignore_label
    normalization normalize }``, ``softmax_param { axis: 1 }``; weight_source holds one
    non-negative number per class (C = x.shape[1]), separated by white space; without it every
    weight is 1. Bottoms and tops as SoftmaxWithLoss.
    """
    type = "SoftmaxWithWeightedLoss"

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        self.class_weights = self._read_weights(bottom[0])

    def _read_weights(self, x):
        p = self.layer_param.loss_param
        c = x.shape[1] if x.num_axes > 1 else 1
        if not p.weight_source:
            return np.ones(c)
        source = p.weight_source
        if _shapes_only[0] and not os.path.exists(source):
            return np.ones(c)
        try:
            with open(source) as f:
                words = f.read().split()
        except (IOError, OSError) as e:
            raise self.error("cannot read the class weights '%s': %s" % (source, e))
        values = []
        for w in words:
            try:
                values.append(float(w))
            except ValueError:
                break                   # the fork's `infile >> v` stops at a non-number
        if any(v < 0 for v in values):
            raise self.error("'%s': class weights cannot be negative" % source)
        if len(values) != c:
            raise self.error("'%s' holds %d class weights, the prediction has %d classes"
                             % (source, len(values), c))
        return np.asarray(values)

    def forward_cpu(self, bottom, top):
        self._softmax(bottom, top)
        w = np.where(self.valid, self.class_weights[self.labels], 0.0)
        logp = np.log(np.maximum(self._label_prob(), FLT_MIN))
        self.w = w
        self.norm = self._normalizer(int(w.sum()))
        top[0].data[...] = -np.sum(w * logp) / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down)
        if not propagate_down[0]:
            return
        d = self._prob_minus_onehot() * self.w[:, None, :]
        d *= float(top[0].diff) / self.norm
        bottom[0].diff[...] = d.reshape(bottom[0].shape)
