"""What pycaffe's ``pycaffe.py`` and ``_caffe.cpp`` attach to ``caffe.Net``: :class:`PycaffeNet`,
a base class of :class:`caffepy.net.Net`.

* ``forward_all(blobs=None, **inputs)`` / ``forward_backward_all(blobs=None, diffs=None, **kw)``:
  run the inputs through the net in batches of the net's batch size (the first dimension of its
  first blob), the last batch padded with zeros and the padding dropped from the results;
  returns ``{blob: array}`` (and ``{blob: diff array}``) over all items.
* ``set_input_arrays(data, labels)``: hand arrays to the net's first layer, a MemoryData layer.
  As pycaffe: 1-d labels become N x 1 x 1 x 1; both arrays must be 4-d, C-contiguous, of the net's
  dtype (float32), shaped N x channels x height x width (labels N x 1 x 1 x 1) with N a multiple of
  the batch size. The arrays are used without copying; keep them unchanged while the net uses them.
* ``_forward(start, end)`` / ``_backward(start, end)`` (layer indices), ``_blob_names``,
  ``_blobs``, ``_inputs`` / ``_outputs`` (blob indices), as the C++ binding.
"""
import itertools

import numpy as np

from ..errors import NetError


class PycaffeNet(object):
    """pycaffe's Python-side Net methods (mixed into :class:`caffepy.net.Net`)."""

    # -- the C++ binding's private names ------------------------------------------------------
    def _forward(self, start, end):
        return self.forward_from_to(start, end)

    def _backward(self, start, end):
        self.backward_from_to(start, end)

    @property
    def _blob_names(self):
        return list(self.blobs)

    @property
    def _blobs(self):
        return list(self.blobs.values())

    @property
    def _inputs(self):
        names = list(self.blobs)
        return [names.index(n) for n in self.inputs]

    @property
    def _outputs(self):
        names = list(self.blobs)
        return [names.index(n) for n in self.outputs]

    # -- batching -----------------------------------------------------------------------------
    def _batch(self, arrays):
        """Yield {name: batch} slices of ``arrays`` (equal-length arrays), the last one zero-padded."""
        if not arrays:
            return
        lengths = {name: len(a) for name, a in arrays.items()}
        if len(set(lengths.values())) != 1:
            raise NetError("net '%s': batched arrays differ in length: %s" % (self.name, lengths))
        num = next(iter(lengths.values()))
        batch_size = next(iter(self.blobs.values())).shape[0]
        full, remainder = divmod(num, batch_size)
        for b in range(full):
            yield {name: a[b * batch_size:(b + 1) * batch_size] for name, a in arrays.items()}
        if remainder:
            padded = {}
            for name, a in arrays.items():
                a = np.asarray(a)
                pad = np.zeros((batch_size - remainder,) + a.shape[1:], dtype=a.dtype)
                padded[name] = np.concatenate([a[-remainder:], pad])
            yield padded

    def forward_all(self, blobs=None, **kwargs):
        """Forward every item of the input arrays in batches; {blob: array of all results}."""
        kwargs = {k: np.asarray(v) for k, v in kwargs.items()}
        names = set(self.outputs + list(blobs or []))
        collected = {name: [] for name in names}
        if not kwargs:
            outs = self.forward(blobs=blobs)
            return {name: value.copy() for name, value in outs.items()}
        for batch in self._batch(kwargs):
            outs = self.forward(blobs=blobs, **batch)
            for name, value in outs.items():
                collected[name].extend(value.copy())
        return _unpad(collected, len(next(iter(kwargs.values()))))

    def forward_backward_all(self, blobs=None, diffs=None, **kwargs):
        """Forward and backward in batches: input arrays (by input name) feed forward, output
        arrays (by output name) are the top diffs; returns ({blob: data}, {blob: diff})."""
        kwargs = {k: np.asarray(v) for k, v in kwargs.items()}
        outs = {name: [] for name in set(self.outputs + list(blobs or []))}
        grads = {name: [] for name in set(self.inputs + list(diffs or []))}
        fwd = self._batch({k: v for k, v in kwargs.items() if k in self.inputs})
        bwd = self._batch({k: v for k, v in kwargs.items() if k in self.outputs})
        for fb, bb in itertools.zip_longest(fwd, bwd, fillvalue={}):
            for name, value in self.forward(blobs=blobs, **fb).items():
                outs[name].extend(value.copy())
            for name, value in self.backward(diffs=diffs, **bb).items():
                grads[name].extend(value.copy())
        total = len(next(iter(kwargs.values()))) if kwargs else None
        return _unpad(outs, total), _unpad(grads, total)

    # -- MemoryData ---------------------------------------------------------------------------
    def set_input_arrays(self, data, labels):
        """Give a MemoryData first layer its arrays (pycaffe's checks; see module doc)."""
        layer = self.layers[0] if self.layers else None
        if layer is None or layer.type != "MemoryData":
            raise NetError("net '%s': set_input_arrays needs a MemoryData layer first, found %s"
                           % (self.name, layer.type if layer is not None else "no layers"))
        where = "set_input_arrays: layer '%s' (MemoryData)" % layer.name
        labels = np.asarray(labels)
        if labels.ndim == 1:
            labels = np.ascontiguousarray(labels[:, None, None, None])
        _check_array(where, "data", data, self.dtype, (layer.channels, layer.height, layer.width))
        _check_array(where, "labels", labels, self.dtype, (1, 1, 1))
        if data.shape[0] != labels.shape[0]:
            raise NetError("%s: data and labels must have the same first dimension (%d vs %d)"
                           % (where, data.shape[0], labels.shape[0]))
        if data.shape[0] % layer.batch_size:
            raise NetError("%s: the first dimension of the arrays (%d) must be a multiple of "
                           "batch_size (%d)" % (where, data.shape[0], layer.batch_size))
        layer.reset(data, labels, data.shape[0])
        self._input_arrays = (data, labels)


def _check_array(where, what, arr, dtype, chw):
    if not isinstance(arr, np.ndarray):
        raise NetError("%s: %s array must be a numpy array, got %s" % (where, what, type(arr).__name__))
    if not arr.flags["C_CONTIGUOUS"]:
        raise NetError("%s: %s array must be C contiguous" % (where, what))
    if arr.ndim != 4:
        raise NetError("%s: %s array must be 4-d, got shape %s" % (where, what, arr.shape))
    if arr.dtype != dtype:
        raise NetError("%s: %s array must be %s, got %s" % (where, what, dtype, arr.dtype))
    for axis, (name, want) in enumerate(zip(("channels", "height", "width"), chw), 1):
        if arr.shape[axis] != want:
            raise NetError("%s: %s array has wrong number of %s (%d, expected %d)"
                           % (where, what, name, arr.shape[axis], want))


def _unpad(collected, total):
    out = {name: np.asarray(values) for name, values in collected.items()}
    if total is None:
        return out
    return {name: (a[:total] if a.ndim and len(a) > total else a) for name, a in out.items()}
