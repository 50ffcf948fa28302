"""The Layer base class (and NeuronLayer, LossLayer), the shapes-only and provided-weights build
modes and ``fork_param``; the layer registry keyed by the prototxt ``type`` string
(``register_layer``, ``create_layer``, ``load_all`` ...) is :mod:`caffepy.layers.registry`, its
names imported from here too.

Life cycle (as Caffe's ``Layer``): ``setup`` checks the blob counts against the arity the class
declares, calls ``layer_setup`` (read the ``*_param``, create parameter blobs) and ``reshape`` (shape
the tops), then records loss weights. ``forward`` reshapes and runs ``forward_cpu`` (or
``forward_gpu`` in GPU mode, where the class has one) and returns the weighted loss; ``backward``
runs ``backward_cpu`` / ``backward_gpu``. Parameter diffs accumulate; bottom diffs are overwritten.

Arity attributes (``None`` = unchecked): ``exact_num_bottom_blobs``, ``min_bottom_blobs``,
``max_bottom_blobs``, ``exact_num_top_blobs``, ``min_top_blobs``, ``max_top_blobs``,
``equal_num_bottom_top_blobs``; ``auto_top_blobs`` lets the net create the minimum number of anonymous
tops. A loss layer sets ``is_loss = True`` (default loss_weight 1 on top 0).
"""
import contextlib
import threading
import weakref

import numpy as np

from .. import common
from ..blob import Blob, ShapeBlob
from ..errors import CaffeError, NetError, ShapeError
from .registry import (  # noqa: F401 -- the registry's names, imported from here too
    PLUGIN_ENV, _LOADERS, _REGISTRY, _VARIANTS, _loaded, add_loader, create_layer,
    get_layer_class, has_layer_type, layer_type_list, load_all, register_layer, register_variant,
    way_out)

_shapes_only = [False]


@contextlib.contextmanager
def shapes_only():
    """Within this block, layers and nets are built for their shapes: parameter blobs declared by
    ``init_param_blobs`` are neither allocated nor filled, and :func:`new_top_blob` gives
    :class:`ShapeBlob` tops, so a net's set-up computes every shape without holding its weights
    or activations (``caffepy summary``). Not thread-safe: one such build at a time."""
    before = _shapes_only[0]
    _shapes_only[0] = True
    try:
        yield
    finally:
        _shapes_only[0] = before


_provided = threading.local()


@contextlib.contextmanager
def weights_provided(names):
    """Within this block (in this thread), the layers named in ``names`` allocate the parameter
    blobs ``init_param_blobs`` declared without filling them: a weights file copied right after
    the build overwrites every one (``Net(..., weights=...)``). Caffe fills them first; skipping
    that leaves the net's other layers filled from the random stream without the skipped draws."""
    before = getattr(_provided, "names", frozenset())
    _provided.names = frozenset(names)
    try:
        yield
    finally:
        _provided.names = before


def new_top_blob(dtype):
    """An empty top blob for a net being built (a ShapeBlob under :func:`shapes_only`)."""
    return (ShapeBlob if _shapes_only[0] else Blob)((), dtype=dtype)


def _gpu_ready():
    """GPU mode: activate the GPU path through caffepy.common's hook (the CPU core never imports
    caffepy.gpu); a one-line GpuUnavailableError when pycuda or a device is missing."""
    return common.activate_gpu()


def fork_param(layer_param, field):
    """A fork's ``*_param`` sub-message of ``layer_param`` (its defaults when unset), or None when
    neither the compiled schema nor a loaded fork schema (``--proto``, :mod:`caffepy.proto.user_schema`)
    has the field (the caller then uses the fork's defaults)."""
    if field in layer_param.DESCRIPTOR.fields_by_name:
        return getattr(layer_param, field)
    from ..proto import user_schema
    view = user_schema.as_merged(layer_param)
    if field in view.DESCRIPTOR.fields_by_name:
        return getattr(view, field)
    return None


class Layer(object):
    type = "Layer"
    exact_num_bottom_blobs = None
    min_bottom_blobs = None
    max_bottom_blobs = None
    exact_num_top_blobs = None
    min_top_blobs = None
    max_top_blobs = None
    equal_num_bottom_top_blobs = False
    auto_top_blobs = False
    is_loss = False
    #: The Net building this layer (a weak proxy, set by :meth:`set_net` before ``setup``), or None
    #: for a layer built on its own.
    net = None

    def __init__(self, layer_param, phase=None, dtype=np.float32):
        from ..proto import caffe_pb2
        self.layer_param = layer_param
        self.phase = layer_param.phase if phase is None else phase
        self.dtype = np.dtype(dtype)
        self.blobs = []
        self.param_propagate_down = []
        self.loss_weights = []
        if layer_param.blobs:
            for bp in layer_param.blobs:
                b = Blob((), dtype=self.dtype)
                b.from_proto(bp)
                self.blobs.append(b)
        self._caffe_pb2 = caffe_pb2

    # -- identity ------------------------------------------------------------------------------
    @property
    def name(self):
        return self.layer_param.name

    def set_net(self, net):
        """Caffe's ``Layer::set_net``: the net calls it before ``setup``. While the layer is set
        up, ``net.layers`` holds the layers before it; the few layers that read the net around
        them use it (RCF's AutoCrop). Kept as a weak proxy: a layer does not keep its net alive."""
        self.net = weakref.proxy(net)

    def error(self, message, cls=NetError):
        return cls("layer '%s' (%s): %s" % (self.layer_param.name, self.layer_param.type, message))

    def shape_mismatch(self, message, i, j, bottom):
        """A ShapeError saying bottom[i] should have bottom[j]'s shape (or j i's): its ``.fits``
        lists both ways out (see :meth:`needs`)."""
        return self.needs(message, [(i, bottom[j].shape, j), (j, bottom[i].shape, i)])

    def needs(self, message, fits):
        """A ShapeError whose ``.fits`` lists (bottom index, shape, like) with which this check
        would pass, ``like`` the index of the bottom whose shape that is, else None. The
        input-size search gives a top of a replaced data layer that is such a bottom that shape
        and builds again (caffepy.zoo.label_shapes); nothing else reads it."""
        e = self.error(message, ShapeError)
        e.fits = [(int(i), tuple(int(d) for d in shape), like) for i, shape, like in fits]
        return e

    def check_shape(self, what, expected, received, bottom=None):
        """ShapeError unless ``received`` is ``expected``; ``bottom``: the index of the bottom
        checked (the error then fits it with ``expected``, see :meth:`needs`)."""
        if tuple(expected) != tuple(received):
            message = "%s: expected shape %s, got %s" % (what, tuple(expected), tuple(received))
            if bottom is None:
                raise self.error(message, ShapeError)
            raise self.needs(message, [(bottom, expected, None)])

    def rng(self):
        return common.rng()

    def new_blob(self, shape=()):
        return Blob(shape, dtype=self.dtype)

    def check_param_blobs(self, shapes):
        """The parameter blobs given with the layer match ``shapes``: their count, then each shape."""
        if len(self.blobs) != len(shapes):
            raise self.error("expected %d parameter blobs, got %d" % (len(shapes), len(self.blobs)))
        for i, (b, s) in enumerate(zip(self.blobs, shapes)):
            self.check_shape("parameter blob %d" % i, s, b.shape)

    def init_param_blobs(self, shapes, weight_filler, bias_filler=None):
        """Check parameter blobs given with the layer against ``shapes`` (count, then each shape),
        or declare them: blob 0 filled by ``weight_filler``, blob 1 (if any) by ``bias_filler``.

        Declared blobs are shapes only (:class:`ShapeBlob`) until ``setup`` has reshaped the
        tops: a bad geometry (an empty output) fails before any memory is taken. Then
        ``setup`` allocates and fills them, in the same order (weight, bias) and at the same point
        of the net's random stream as filling here would; under :func:`shapes_only` they stay
        shapes."""
        if self.blobs:
            self.check_param_blobs(shapes)
            return
        self.blobs = [ShapeBlob(s, dtype=self.dtype) for s in shapes]
        self._declared_fillers = (weight_filler, bias_filler)

    def _fill_declared_params(self):
        """Allocate and fill the blobs ``init_param_blobs`` declared (see there)."""
        fillers = self.__dict__.pop("_declared_fillers", None)
        if fillers is None or _shapes_only[0]:
            return
        from ..fillers import get_filler
        self.blobs = [self.new_blob(b.shape) for b in self.blobs]
        if self.layer_param.name in getattr(_provided, "names", ()):
            return                              # overwritten next (see weights_provided)
        try:
            self.fill_weights(self.blobs[0], get_filler(fillers[0]))
            if len(self.blobs) > 1:
                get_filler(fillers[1]).fill(self.blobs[1])
        except CaffeError as e:             # a filler's error, named with its layer
            raise self.error(str(e)) from None

    def fill_weights(self, blob, filler):
        """Fill parameter blob 0 declared by ``init_param_blobs`` (override where a layer keeps
        its weights in another form than the filler draws them: the Winograd domain)."""
        filler.fill(blob)

    # -- life cycle ----------------------------------------------------------------------------
    def setup(self, bottom, top):
        if common.mode() == common.GPU:
            _gpu_ready()
        self.check_blob_counts(bottom, top)
        self.layer_setup(bottom, top)
        self.reshape(bottom, top)
        self._fill_declared_params()
        self.set_loss_weights(top)

    def layer_setup(self, bottom, top):
        """Read the layer's parameters and create its parameter blobs (override)."""

    def reshape(self, bottom, top):
        """Shape the tops from the bottoms (override)."""
        raise self.error("%s.%s has no reshape (a layer must shape its tops)"
                         % (type(self).__module__, type(self).__qualname__))

    def forward(self, bottom, top):
        self.reshape(bottom, top)
        if common.mode() == common.GPU and _gpu_ready() and hasattr(self, "forward_gpu"):
            self.forward_gpu(bottom, top)
        else:
            self.forward_cpu(bottom, top)
        loss = 0.0
        for t, w in zip(top, self.loss_weights):
            if w:
                loss += w * float(np.sum(t.data, dtype=np.float64))
        return loss

    def backward(self, top, propagate_down, bottom):
        if common.mode() == common.GPU and hasattr(self, "backward_gpu"):
            self.backward_gpu(top, propagate_down, bottom)
        else:
            self.backward_cpu(top, propagate_down, bottom)

    def forward_cpu(self, bottom, top):
        """Compute the tops (override); a class without it gives shapes only (summary, draw)."""
        raise self.error("%s.%s has no forward_cpu: it gives shapes only (enough for summary and "
                         "draw), not a forward pass"
                         % (type(self).__module__, type(self).__qualname__))

    def backward_cpu(self, top, propagate_down, bottom):
        """Default: a layer with no gradient rejects a request to propagate one."""
        if any(propagate_down):
            raise self.error("backward is not implemented for this layer type")

    # -- loss weights --------------------------------------------------------------------------
    def set_loss_weights(self, top):
        lw = list(self.layer_param.loss_weight)
        if lw and len(lw) != len(top):
            raise self.error("loss_weight must be unspecified or given once per top (%d tops, %d "
                             "loss_weight values)" % (len(top), len(lw)))
        if not lw:
            lw = [1.0 if (self.is_loss and i == 0) else 0.0 for i in range(len(top))]
        self.loss_weights = lw
        for t, w in zip(top, lw):
            if w:
                t.diff[...] = w

    def loss(self, top_index):
        return self.loss_weights[top_index] if top_index < len(self.loss_weights) else 0.0

    def allow_force_backward(self, bottom_index):
        """Whether force_backward may ask for the gradient of this bottom (labels: no)."""
        return True

    # -- arity ---------------------------------------------------------------------------------
    def check_blob_counts(self, bottom, top):
        nb, nt = len(bottom), len(top)

        for kind, n, exact, lo, hi in (("bottom", nb, self.exact_num_bottom_blobs,
                                        self.min_bottom_blobs, self.max_bottom_blobs),
                                       ("top", nt, self.exact_num_top_blobs,
                                        self.min_top_blobs, self.max_top_blobs)):
            if exact is not None and n != exact:
                raise self.error("takes exactly %d %s blob(s), got %d" % (exact, kind, n))
            if lo is not None and n < lo:
                raise self.error("takes at least %d %s blob(s), got %d" % (lo, kind, n))
            if hi is not None and n > hi:
                raise self.error("takes at most %d %s blob(s), got %d" % (hi, kind, n))
        if self.equal_num_bottom_top_blobs and nb != nt:
            raise self.error("takes as many top blobs as bottom blobs (%d bottom, %d top)" % (nb, nt))


class NeuronLayer(Layer):
    """Element-wise layers: one bottom, one top of the same shape (may be in-place)."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if top[0] is not bottom[0]:
            top[0].reshape(bottom[0].shape)


class LossLayer(Layer):
    """Loss layers: bottoms (prediction, label[, ...]), a scalar top with default loss_weight 1.

    The two first bottoms must have the same outer (num) dimension. Labels get no gradient.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1
    auto_top_blobs = True
    is_loss = True

    def reshape(self, bottom, top):
        s0, s1 = tuple(bottom[0].shape), tuple(bottom[1].shape)
        if s0[:1] != s1[:1]:
            raise self.needs("the data and label should have the same first dimension (got %s "
                             "and %s)" % (s0, s1), [(1, s0[:1] + s1[1:], None),
                                                    (0, s1[:1] + s0[1:], None)])
        top[0].reshape(())

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1
