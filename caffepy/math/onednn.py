"""oneDNN convolutions for the CPU path (its wheel is a dependency on Linux x86-64).

oneDNN (Intel's deep-learning primitives library, formerly MKL-DNN; the library PyTorch's CPU
convolutions run on) computes a convolution directly from cache-sized blocks of the input, with
JIT-generated AVX2 / AVX-512 kernels, instead of writing an im2col column buffer and calling a
GEMM on it. CIFAR10-quick's 5x5 convolutions (32 output channels, K = 800) run at about half
the BLAS peak through im2col + GEMM, because the GEMM packs a column buffer far larger than the
caches; oneDNN runs them near the peak.

The library is loaded with ctypes from the ``onednn-cpu-gomp`` wheel (``libdnnl.so.3`` under
``sys.prefix/lib`` or the user base's ``lib`` (``pip install --user``), or
``CAFFEPY_ONEDNN_LIB``): the C API of oneDNN v3, no compiler, no Python binding. It threads
with GNU OpenMP, the runtime numba's ``omp`` layer also uses (one pool, ``OMP_NUM_THREADS``
threads). ``CAFFEPY_ONEDNN=0`` or :func:`set_enabled(False)` switches it off;
:func:`get` returns None then, or where the library is missing, and the layers keep im2col + GEMM.

:class:`ConvPlan` (:mod:`caffepy.math.onednn_conv`) holds the three primitives of one convolution geometry (forward, data gradient,
weight + bias gradient). oneDNN picks its own (blocked) memory formats; the plan reorders Caffe's
NCHW blobs and OIHW weights into them and back, in scratch arrays of the net's workspace, so the
blobs stay plain numpy arrays. Results equal im2col + GEMM up to float32 rounding (another
summation order).
"""
import ctypes
import os
import sys
import threading

import numpy as np

from . import kernels

UNDEF, F32 = 0, 3                         # dnnl_data_type_undef, dnnl_f32
ANY = 1                                   # dnnl_format_tag_any
CPU = 1                                   # dnnl_cpu
FORWARD_TRAINING = 64
CONV_DIRECT, DECONV_DIRECT = 0x1, 0xa      # dnnl_convolution_direct, dnnl_deconvolution_direct
ARG_SRC, ARG_DST, ARG_WEIGHTS, ARG_BIAS = 1, 17, 33, 41
ARG_DIFF_SRC, ARG_DIFF_DST, ARG_DIFF_WEIGHTS, ARG_DIFF_BIAS = 129, 145, 161, 169
ARG_SCRATCHPAD = 80
Q_SRC, Q_DIFF_SRC, Q_WEIGHTS, Q_DIFF_WEIGHTS, Q_DST, Q_DIFF_DST = 129, 130, 131, 132, 133, 134
Q_SCRATCHPAD = 136
SCRATCHPAD_USER = 1                       # dnnl_scratchpad_mode_user
ALIGN = 64      # bytes: oneDNN's vector loads prefer cache-line aligned buffers
MAX_NDIMS = 12

Dims = ctypes.c_int64 * MAX_NDIMS
_vp = ctypes.c_void_p


class _ExecArg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", _vp)]


_state = {"engine": None, "error": None, "attr": None, "attr_sum": None}
_attr_lock = threading.Lock()
_local = threading.local()      # a stream per thread (a stream is not meant to be shared)


def _candidates():
    env = os.environ.get("CAFFEPY_ONEDNN_LIB")
    if env:
        return [env]
    import site
    prefixes = dict.fromkeys((sys.prefix, sys.base_prefix, site.getuserbase()))
    return [os.path.join(prefix, "lib", "libdnnl.so.3") for prefix in prefixes] + ["libdnnl.so.3"]


def _load():
    # libgomp reads its wait policy once, when it is loaded (here, with libdnnl, unless numba's
    # kernels loaded it first): its idle threads must sleep, not spin on the cores that BLAS's
    # threads need next (measured: ResNet-50's exact forward 5x slower at 2 BLAS threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            _state["error"] = "%s: %s" % (path, e)
    else:
        return None
    lib.dnnl_primitive_desc_query_md.restype = _vp
    lib.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
    lib.dnnl_memory_desc_equal.restype = ctypes.c_int
    engine = _vp()
    if lib.dnnl_engine_create(ctypes.byref(engine), CPU, ctypes.c_size_t(0)) != 0:
        _state["error"] = "dnnl_engine_create failed"
        return None
    _state["engine"] = engine
    return lib


def _stream():
    stream = getattr(_local, "stream", None)
    if stream is None:
        stream = _vp()
        _check(get().dnnl_stream_create(ctypes.byref(stream), _state["engine"], ctypes.c_uint(1)),
               "stream create")
        _local.stream = stream
    return stream


_switch = kernels.Switch("CAFFEPY_ONEDNN", _load)
get = _switch.get                   # the loaded library (ctypes.CDLL), or None
available = _switch.available
set_enabled = _switch.set_enabled   # on (True), off (False), or back to the environment (None)
disabled = _switch.disabled


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint),
                ("gpu_runtime", ctypes.c_uint)]


def version():
    """'3.2.0' for the loaded library, None where it is not in use."""
    lib = get()
    if lib is None:
        return None
    lib.dnnl_version.restype = ctypes.POINTER(_Version)
    v = lib.dnnl_version().contents
    return "%d.%d.%d" % (v.major, v.minor, v.patch)


def channel_block():
    """Floats per channel block of oneDNN's blocked formats on this machine: 16 where its kernels
    use AVX-512 (``dnnl_get_effective_cpu_isa``: the avx512 bit, 0x20, of ``dnnl_cpu_isa_t``), 8
    otherwise; None where oneDNN is not in use."""
    lib = get()
    if lib is None:
        return None
    if "block" not in _state:
        _state["block"] = 16 if int(lib.dnnl_get_effective_cpu_isa()) & 0x20 else 8
    return _state["block"]


def limit_threads(n):
    """OpenMP threads for oneDNN's primitives run from the calling thread (an OpenMP setting
    holds per thread): the distributed engine's workers compute at once and share the cores."""
    if getattr(_local, "threads", None) == n:
        return
    gomp = _state.get("gomp")
    if gomp is None:
        try:
            gomp = _state["gomp"] = ctypes.CDLL("libgomp.so.1")     # the runtime libdnnl uses
        except OSError:
            gomp = _state["gomp"] = False
    if gomp:
        gomp.omp_set_num_threads(int(n))
    _local.threads = n


class OneDNNError(RuntimeError):
    pass


def _check(status, what):
    if status != 0:
        raise OneDNNError("oneDNN: %s failed (dnnl_status_t %d)" % (what, status))


def _dims(values):
    d = Dims()
    for i, v in enumerate(values):
        d[i] = int(v)
    return d


class _Md:
    """An owned memory descriptor (plain strides, or ``any`` format)."""

    def __init__(self, shape, strides=None):
        lib = get()
        self.handle = _vp()
        if strides is None:
            _check(lib.dnnl_memory_desc_create_with_tag(
                ctypes.byref(self.handle), len(shape), _dims(shape), F32, ANY), "memory desc")
        else:
            _check(lib.dnnl_memory_desc_create_with_strides(
                ctypes.byref(self.handle), len(shape), _dims(shape), F32, _dims(strides)),
                "memory desc")

    @classmethod
    def plain(cls, shape):
        strides, s = [], 1
        for n in reversed(shape):
            strides.append(s)
            s *= n
        return cls(shape, strides[::-1])

    def __del__(self):
        lib = _switch.value
        if lib is not None and self.handle:
            lib.dnnl_memory_desc_destroy(self.handle)


def _attr(accumulate=False):
    """The primitive attributes every primitive is made with (a descriptor keeps its own copy):
    the scratchpad is the user's, so each primitive gets its own and primitives may run in
    threads other than the one that made them, and at once (the library's default scratchpad is
    one per thread, shared by all its primitives: a primitive run from another thread may share
    it with one running there). ``accumulate``: also a sum post-op, dst = result + dst (a reorder
    that adds into its destination). Made once each."""
    key = "attr_sum" if accumulate else "attr"
    with _attr_lock:
        if _state[key] is None:
            lib, attr = get(), _vp()
            _check(lib.dnnl_primitive_attr_create(ctypes.byref(attr)), "attr create")
            _check(lib.dnnl_primitive_attr_set_scratchpad_mode(attr, SCRATCHPAD_USER),
                   "scratchpad mode")
            if accumulate:
                ops = _vp()
                _check(lib.dnnl_post_ops_create(ctypes.byref(ops)), "post-ops create")
                try:
                    _check(lib.dnnl_post_ops_append_sum(ops, ctypes.c_float(1.0), 0, UNDEF),
                           "sum post-op")
                    _check(lib.dnnl_primitive_attr_set_post_ops(attr, ops), "set post-ops")
                finally:
                    lib.dnnl_post_ops_destroy(ops)
            _state[key] = attr
        return _state[key]


def aligned(buf, floats):
    """The first ``floats`` elements of float32 ``buf`` from its first ``ALIGN``-byte boundary
    (``buf`` holds ``ALIGN // 4`` elements more)."""
    off = (-buf.ctypes.data % ALIGN) // 4
    return buf[off:off + floats]


class _Primitive:
    """A primitive and its descriptor; ``md(query)`` gives the memory descriptors it chose. Its
    scratchpad (made with :func:`_attr`: the user's) is an array of its own."""

    def __init__(self, pd):
        lib = get()
        self.pd, self.prim = pd, _vp()
        _check(lib.dnnl_primitive_create(ctypes.byref(self.prim), pd), "primitive create")
        self.pad = None
        md = self.md(Q_SCRATCHPAD)
        if md and lib.dnnl_memory_desc_get_size(md) > 0:
            self.pad = _Memory(md)
            floats = (self.pad.nbytes + 3) // 4
            self.pad_array = aligned(np.empty(floats + ALIGN // 4, np.float32), floats)
            self.pad_handle = self.pad.bind(self.pad_array)

    def md(self, query):
        return _vp(get().dnnl_primitive_desc_query_md(self.pd, query, 0))

    def run(self, args):
        """args: [(DNNL_ARG_*, memory handle)]."""
        lib = get()
        if self.pad is not None:
            args = list(args) + [(ARG_SCRATCHPAD, self.pad_handle)]
        arr = (_ExecArg * len(args))(*[_ExecArg(a, m) for a, m in args])
        _check(lib.dnnl_primitive_execute(self.prim, _stream(), len(args), arr), "execute")

    def __del__(self):
        lib = _switch.value
        if lib is not None:
            lib.dnnl_primitive_destroy(self.prim)
            lib.dnnl_primitive_desc_destroy(self.pd)


class _Memory:
    """A memory object of one descriptor whose data handle is set per call (numpy arrays)."""

    def __init__(self, md):
        lib = get()
        self.md = md
        self.nbytes = lib.dnnl_memory_desc_get_size(md)
        self.handle = _vp()
        _check(lib.dnnl_memory_create(ctypes.byref(self.handle), md, _state["engine"], None),
               "memory create")

    def bind(self, array):
        _check(get().dnnl_memory_set_data_handle(self.handle, _vp(array.ctypes.data)),
               "set data handle")
        return self.handle

    def __del__(self):
        lib = _switch.value
        if lib is not None and self.handle:
            lib.dnnl_memory_destroy(self.handle)


class _Layout:
    """One tensor seen plain (Caffe's order) by the layer and in a primitive's chosen format:
    ``to_inner`` / ``to_plain`` reorder through a scratch array (nothing where the formats are
    equal)."""

    def __init__(self, plain_md, inner_md):
        lib = get()
        self.plain = _Memory(plain_md)
        self.same = bool(lib.dnnl_memory_desc_equal(plain_md, inner_md))
        self.inner = self.plain if self.same else _Memory(inner_md)
        self._in = self._out = self._out_add = None
        if not self.same:
            self._in = _reorder(plain_md, inner_md)
            self._out = _reorder(inner_md, plain_md)

    def to_inner(self, array, scratch):
        """Memory handle holding ``array`` in the inner format (``scratch``: float32 array of
        at least ``inner.nbytes``)."""
        src = self.plain.bind(array)
        if self.same:
            return src
        dst = self.inner.bind(scratch)
        self._in.run([(ARG_SRC, src), (ARG_DST, dst)])
        return dst

    def inner_handle(self, array, scratch):
        """The memory handle a primitive writes this tensor to (``array`` itself where plain)."""
        return self.plain.bind(array) if self.same else self.inner.bind(scratch)

    def to_plain(self, scratch, array):
        if not self.same:
            self._out.run([(ARG_SRC, self.inner.bind(scratch)), (ARG_DST, self.plain.bind(array))])

    def add_to_plain(self, scratch, array):
        """``array += scratch`` seen plain: one reorder with a sum post-op, or an add where the
        formats are equal (``scratch`` then holds the plain values; ``array`` contiguous)."""
        if self.same:
            flat = array.reshape(-1)
            flat += scratch
            return
        if self._out_add is None:
            self._out_add = _reorder(self.inner.md, self.plain.md, accumulate=True)
        self._out_add.run([(ARG_SRC, self.inner.bind(scratch)), (ARG_DST, self.plain.bind(array))])

    def scratch_floats(self):
        return 0 if self.same else (self.inner.nbytes + 3) // 4


def _primitive(create, what, *args):
    """A _Primitive from the descriptor that ``create(&pd, *args)`` makes."""
    pd = _vp()
    _check(create(ctypes.byref(pd), *args), what)
    return _Primitive(pd)


def _reorder(src_md, dst_md, accumulate=False):
    engine = _state["engine"]
    return _primitive(get().dnnl_reorder_primitive_desc_create, "reorder", src_md, engine,
                      dst_md, engine, _attr(accumulate))


from .onednn_conv import ConvPlan  # noqa: E402,F401  (the convolution primitives' plan)
