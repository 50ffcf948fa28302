"""apollocaffe (BestSonny/apollocaffe, also Charleen777/caffecode): Wordvec, CapSequence and Py
(src/caffe/layers/wordvec_layer.cpp, cap_sequence_layer.cpp, py_layer.cpp). apollocaffe's net
hands each layer a runtime parameter, ``rp``, with every forward; in a prototxt it is the
layer's ``rp`` field.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer


@register_layer("Wordvec")
class WordvecLayer(Layer):
    """Word embedding: top[n] = W[round(x_n)] with W (1 x V x 1 x D, ``weight_filler``) and the
    word index int(x_n + 0.5). Bottom: N values (count = N); top N x D. Backward: W's diff is
    overwritten (not accumulated, apollocaffe's overwrites_param_diffs) with the sum of the top
    gradients of each word's rows; the indices get none. A word >= V is refused. prototxt:
    ``wordvec_param { dimension vocab_size weight_filler }`` (both sizes required).
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "wordvec_param")
        if not (p.HasField("dimension") and p.HasField("vocab_size")):
            raise self.error("wordvec_param needs dimension and vocab_size")
        self.d, self.v = int(p.dimension), int(p.vocab_size)
        self.init_param_blobs([(1, self.v, 1, self.d)], p.weight_filler)
        self.param_propagate_down = [True]

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes < 1 or x.count != x.shape[0]:
            raise self.error("bottom must hold one word per item, got %s" % (x.shape,),
                             ShapeError)
        top[0].reshape(x.shape[0], self.d)

    def _words(self, bottom):
        words = np.trunc(bottom[0].data.reshape(-1) + 0.5).astype(np.int64)
        if words.size and words.max() >= self.v:
            raise self.error("word %d is not below vocab_size %d" % (words.max(), self.v))
        return words

    def forward_cpu(self, bottom, top):
        top[0].data[...] = self.blobs[0].data.reshape(self.v, self.d)[self._words(bottom)]

    def backward_cpu(self, top, propagate_down, bottom):
        dw = self.blobs[0].diff.reshape(self.v, self.d)
        dw[...] = 0
        np.add.at(dw, self._words(bottom), top[0].diff)


@register_layer("CapSequence")
class CapSequenceLayer(Layer):
    """The last RNN step of each sequence of a batch: with l_i = ``rp.cap_sequence_param.
    sequence_lengths[i]``, top[i] = bottom[l_i][i] (bottoms: the steps, each of bottom 0's shape;
    items past the list keep 0 here). Backward: bottom[l_i][i] gets top[i]'s gradient; every
    other value of the bottoms gets 0 (apollocaffe adds into diffs its net has cleared).
    prototxt: ``rp { cap_sequence_param { sequence_lengths ... } }``.
    """
    min_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        for i, b in enumerate(bottom):
            if b.shape != bottom[0].shape:
                raise self.error("bottom[%d] %s must have bottom 0's shape %s"
                                 % (i, b.shape, bottom[0].shape), ShapeError)
        self.lengths = [int(v) for v in self.layer_param.rp.cap_sequence_param.sequence_lengths]
        if len(self.lengths) > bottom[0].shape[0]:
            raise self.error("%d sequence lengths for a batch of %d"
                             % (len(self.lengths), bottom[0].shape[0]), ShapeError)
        for v in self.lengths:
            if v >= len(bottom):
                raise self.error("sequence length %d exceeds the number of bottoms (%d)"
                                 % (v, len(bottom)))
        top[0].reshape(*bottom[0].shape)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = 0
        for i, v in enumerate(self.lengths):
            top[0].data[i] = bottom[v].data[i]

    def backward_cpu(self, top, propagate_down, bottom):
        for b, down in zip(bottom, propagate_down):
            if down:
                b.diff[...] = 0
        for i, v in enumerate(self.lengths):
            if propagate_down[v]:
                bottom[v].diff[i] += top[0].diff[i]


@register_layer("Py")
class PyLayer(Layer):
    """apollocaffe's Python-layer holder: it creates the parameter blobs of ``py_param`` (shape
    i from ``param_shapes[i].dimension``, filled by ``param_fillers[i]`` when given) and computes
    nothing; apollocaffe runs the layer's Python object (python/apollocaffe/layers/
    python_layers.py), which a prototxt cannot carry. As the fork: no reshape (tops keep their
    shapes), an empty forward and backward. prototxt: ``py_param { param_shapes { dimension ... }
    param_fillers { ... } }``.
    """

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "py_param")
        shapes = [tuple(int(d) for d in s.dimension) for s in p.param_shapes]
        if p.param_fillers and len(p.param_fillers) != len(shapes):
            raise self.error("mismatched number of param fillers (%d) and param shapes (%d)"
                             % (len(p.param_fillers), len(shapes)))
        if not self.blobs:
            self.blobs = [self.new_blob(s) for s in shapes]
            for b, f in zip(self.blobs, p.param_fillers):
                self.fill_weights(b, _filler(f))

    def reshape(self, bottom, top):
        pass

    def forward_cpu(self, bottom, top):
        pass

    def backward_cpu(self, top, propagate_down, bottom):
        pass


def _filler(param):
    from ...fillers import get_filler
    return get_filler(param)
