"""Layers that gather rows by index: BatchReindex, Filter, Embed."""
import numpy as np

from ..errors import ShapeError
from ..fillers import get_filler
from .base import Layer, register_layer


def _indices(layer, values, limit, what):
    """Float index values -> int array, checking that they are integers in [0, limit)."""
    idx = values.astype(np.int64)
    if values.size and (np.any(idx != values) or idx.min() < 0 or idx.max() >= limit):
        bad = values[(idx != values) | (idx < 0) | (idx >= limit)].ravel()[0]
        raise layer.error("%s must be integers in [0, %d), got %g" % (what, limit, bad))
    return idx


@register_layer("BatchReindex")
class BatchReindexLayer(Layer):
    """Picks items of the batch by index: y[i] = x[idx[i]] (repeats and omissions allowed).

    dL/dx[n] = sum of dL/dy[i] over the i with idx[i] = n; no gradient to the indices.
    Bottoms: x (N, ...), idx (M,) with integer values in [0, N). Top: (M, ...). No parameters.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[1].num_axes != 1:
            raise self.error("the index bottom must be 1-d, got shape %s" % (bottom[1].shape,),
                             ShapeError)
        top[0].reshape(bottom[1].shape + bottom[0].shape[1:])

    def forward_cpu(self, bottom, top):
        self.idx = _indices(self, bottom[1].data, bottom[0].shape[0], "indices")
        top[0].data[...] = bottom[0].data[self.idx]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the indices (bottom[1])")
        if propagate_down[0]:
            bottom[0].diff[...] = 0
            np.add.at(bottom[0].diff, self.idx, top[0].diff)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("Filter")
class FilterLayer(Layer):
    """Keeps the items whose selector is non-zero: y_t = x_t[sel != 0] for each of k bottoms.

    dL/dx_t is dL/dy_t on the kept items, 0 elsewhere; no gradient to the selector.
    Bottoms: x_0 .. x_{k-1} (N, ...) then the selector (N,) or (N, 1, ...). Tops: k blobs
    (M, ...) with M the number of selected items (N at setup, before any selector is known).
    """
    min_bottom_blobs = 2
    min_top_blobs = 1

    def layer_setup(self, bottom, top):
        if len(top) != len(bottom) - 1:
            raise self.error("takes one top per filtered bottom (%d bottoms incl. the selector, "
                             "%d tops)" % (len(bottom), len(top)))
        self.num_bottom = len(bottom)
        self._first_reshape = True

    def reshape(self, bottom, top):
        sel = bottom[-1]
        if any(d != 1 for d in sel.shape[1:]):
            raise self.error("selector shape %s must be (N,) or (N, 1, ...)" % (sel.shape,),
                             ShapeError)
        for i, b in enumerate(bottom[:-1]):
            if b.shape[:1] != sel.shape[:1]:
                raise self.error("bottom[%d] shape %s and selector shape %s differ in axis 0"
                                 % (i, b.shape, sel.shape), ShapeError)
        self.keep = np.flatnonzero(sel.data.reshape(-1))
        n = sel.shape[0] if self._first_reshape else self.keep.size
        self._first_reshape = False
        for t, b in zip(top, bottom):
            t.reshape((n,) + b.shape[1:])

    def forward_cpu(self, bottom, top):
        for t, b in zip(top, bottom):
            t.data[...] = b.data[self.keep]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[-1]:
            raise self.error("cannot backpropagate to the selector (last bottom)")
        for t, b, down in zip(top, bottom, propagate_down):
            if down:
                b.diff[...] = 0
                b.diff[self.keep] = t.diff

    def allow_force_backward(self, bottom_index):
        return bottom_index != self.num_bottom - 1


@register_layer("Embed")
class EmbedLayer(Layer):
    """A lookup table: y[..., :] = W[x[...], :] + b, for integer ids x in [0, input_dim).

    dL/dW[k] += sum of dL/dy over the positions with id k; dL/db += sum of dL/dy over all
    positions; no gradient to the ids.
    prototxt: ``embed_param { num_output input_dim bias_term: true weight_filler bias_filler }``
    (fillers default to constant 0). Bottom: ids of any shape. Top: ids.shape + (num_output,).
    Params: W (input_dim, num_output), b (num_output,) when bias_term.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.embed_param
        self.num_output, self.input_dim = p.num_output, p.input_dim
        if self.num_output <= 0 or self.input_dim <= 0:
            raise self.error("num_output and input_dim must be positive, got %d and %d"
                             % (self.num_output, self.input_dim))
        shapes = [(self.input_dim, self.num_output)] + ([(self.num_output,)] if p.bias_term else [])
        if not self.blobs:
            self.blobs = [self.new_blob(s) for s in shapes]
            get_filler(p.weight_filler).fill(self.blobs[0])
            if p.bias_term:
                get_filler(p.bias_filler).fill(self.blobs[1])
        else:
            got = [b.shape for b in self.blobs]
            if got != shapes:
                raise self.error("parameter shapes %s do not match the expected %s" % (got, shapes))
        self.param_propagate_down = [True] * len(self.blobs)

    def reshape(self, bottom, top):
        top[0].reshape(bottom[0].shape + (self.num_output,))

    def forward_cpu(self, bottom, top):
        self.ids = _indices(self, bottom[0].data, self.input_dim, "embedding ids").reshape(-1)
        y = self.blobs[0].data[self.ids]
        if len(self.blobs) > 1:
            y = y + self.blobs[1].data
        top[0].data[...] = y.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            raise self.error("cannot backpropagate to the embedding ids (bottom[0])")
        dy = top[0].diff.reshape(-1, self.num_output)
        if self.param_propagate_down[0]:
            np.add.at(self.blobs[0].diff, self.ids, dy)
        if len(self.blobs) > 1 and self.param_propagate_down[1]:
            self.blobs[1].diff[...] += dy.sum(axis=0)

    def allow_force_backward(self, bottom_index):
        return False
