"""GPU implementations of the layers, one module per family, attached to the CPU classes.

A family module registers an implementation class per prototxt type::

    @gpu_impl("ReLU")
    class ReLU(object):
        def forward_gpu(self, bottom, top): ...           # self is the ReLULayer
        def backward_gpu(self, top, propagate_down, bottom): ...
        def supports_gpu(self): ...                        # optional: False -> the CPU path

When GPU mode is activated, :func:`attach_all` sets ``forward_gpu`` / ``backward_gpu`` on the
registered layer classes (``Layer.forward`` dispatches to them in GPU mode). A subclass of such a
class without its own GPU implementation keeps its CPU path, and so does a layer whose
``supports_gpu`` says no (e.g. a 3-d convolution): the blobs' lazy host/device sync keeps both
paths correct side by side. Layers without a GPU implementation run on the CPU the same way.
"""
import importlib
import pkgutil

_IMPLS = {}
_attached = {}


def gpu_impl(*type_names):
    """Class decorator: the GPU implementation of the layer types ``type_names``."""
    def deco(impl):
        for name in type_names:
            if name in _IMPLS:
                raise RuntimeError("GPU implementation of '%s' registered twice (%s and %s)"
                                   % (name, _IMPLS[name].__name__, impl.__name__))
            _IMPLS[name] = impl
        return impl
    return deco


def load_all():
    """Import every family module of this package (each registers its kernels and classes)."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module("%s.%s" % (__name__, info.name))
    return dict(_IMPLS)


def registered_types():
    load_all()
    return sorted(_IMPLS)


def _guarded(cls, impl, fn, cpu_name):
    supports = impl.__dict__.get("supports_gpu")

    def method(self, *args):
        if type(self) is not cls or (supports is not None and not supports(self)):
            return getattr(self, cpu_name)(*args)
        return fn(self, *args)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    method.gpu_impl = impl
    return method


def attach(cls, impl):
    """Give ``cls`` the GPU methods of ``impl`` (not overriding GPU methods the class defines)."""
    for name, cpu_name in (("forward_gpu", "forward_cpu"), ("backward_gpu", "backward_cpu")):
        fn = impl.__dict__.get(name)
        if fn is None:
            continue
        own = cls.__dict__.get(name)
        if own is not None and getattr(own, "gpu_impl", None) is None:
            continue
        setattr(cls, name, _guarded(cls, impl, fn, cpu_name))
    for name, value in impl.__dict__.items():
        if name.startswith("_gpu_") and not hasattr(cls, name):
            setattr(cls, name, value)


def attach_all():
    """Attach every registered implementation to its layer class (idempotent)."""
    from ...layers.base import get_layer_class
    load_all()
    for type_name, impl in _IMPLS.items():
        cls = get_layer_class(type_name)
        if not cls.__module__.startswith("caffepy."):
            continue        # a plug-in overriding the type: the built-in's kernels are not its
        if _attached.get(cls) is not impl:
            attach(cls, impl)
            _attached[cls] = impl
    return dict(_attached)
