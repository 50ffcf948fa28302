"""How the model-zoo sweeps (tests/test_modelzoo.py, tests/test_onnx_zoo.py) prepare a net file:
data layers replaced by Input layers, fillers made constant, the batch brought to 1 (or to the one
a fixed Reshape hard-codes), files whose Python data layer cannot be loaded set apart, and large
inputs shrunk for a cheaper first try (``shrunk``)."""
import numpy as np

SHRINK_SIDE = 320       # image inputs larger than this are tried at this size first
MIN_SIDE = 96           # ... but not below this


def _batch_one(net_param):
    for lp in net_param.layer:
        if lp.type == "Input":
            for shape in lp.input_param.shape:
                if len(shape.dim) and shape.dim[0] > 1:
                    shape.dim[0] = 1


PYTHON_DATA = "python data layer not available"


class PythonDataMissing(Exception):
    """The file's data comes from a Python layer caffepy cannot load (not run, not counted)."""


def is_python_data(reason):
    return bool(reason) and reason.startswith(PythonDataMissing.__name__)


def prepare(path):
    """(batch-1 net, declared-batch net) NetParameters, data layers replaced, fillers constant."""
    from caffepy import zoo
    from caffepy.proto import io as proto_io
    raw = zoo.fill_unset_num_output(proto_io.read_net(path))
    missing = missing_python_data(raw)
    if missing:
        raise PythonDataMissing("%s (%s)" % (PYTHON_DATA, ", ".join(sorted(set(missing)))))
    declared = zoo.constant_fillers(zoo.replace_data_layers(raw))
    _batch_from_fixed_reshape(declared)
    param = zoo.constant_fillers(zoo.replace_data_layers(raw, batch_size=1))
    _batch_one(param)
    return param, declared


def _phase_of(lp):
    return next((r.phase for r in lp.include if r.HasField("phase")), None)


def _batch_from_fixed_reshape(net_param):
    """Inputs of a phase with a Reshape to fixed dims (d1, ..., dk) get batch d1 * ... * d(k-1)
    (LRCN: frames x clips; the batch is hard-coded in its Python data layer)."""
    for r in net_param.layer:
        dims = list(r.reshape_param.shape.dim) if r.type == "Reshape" else []
        if len(dims) < 2 or min(dims) <= 0:
            continue
        batch = int(np.prod(dims[:-1]))
        for lp in net_param.layer:
            if lp.type == "Input" and _phase_of(lp) in (None, _phase_of(r)):
                for shape in lp.input_param.shape:
                    if len(shape.dim) and shape.dim[0] == 1:
                        shape.dim[0] = batch


def missing_python_data(net_param):
    """``module.Class`` of each Python data layer (no bottoms) that is neither a caffepy built-in
    nor importable: its tops' shapes could only be guessed."""
    import importlib.util
    from caffepy import zoo
    from caffepy.forks import builtin_layer_class
    missing = []
    for lp in net_param.layer:
        if lp.type != "Python" or not zoo.is_data_layer(lp):
            continue
        module, cls = lp.python_param.module, lp.python_param.layer
        if builtin_layer_class(module, cls) is not None:
            continue
        try:
            found = importlib.util.find_spec(module) is not None if module else False
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append("%s.%s" % (module, cls))
    return missing


def _input_shapes(lp):
    """The BlobShapes an Input or DummyData layer declares (none for other layers)."""
    if lp.type == "Input":
        return lp.input_param.shape
    return lp.dummy_data_param.shape if lp.type == "DummyData" else ()


def _is_image(shape):
    """An image input: 4-d, both sides at least 64."""
    return len(shape.dim) == 4 and min(shape.dim[2], shape.dim[3]) >= 64


def shrunk(param, side=SHRINK_SIDE):
    """A copy of ``param`` whose image inputs (Input or DummyData, 4-d, both sides >= 64) hold
    more than ``side`` x ``side`` pixels over their batch (N x H x W), scaled down by one factor to
    fit that budget, each side a multiple of 32 and at least MIN_SIDE (an LRCN deploy's 160 frames
    of 227 x 227, whose batch its Reshape fixes, run at 96 x 96); an Interp layer's fixed
    ``height`` / ``width`` (PSPNet's pyramid, sized for the declared input) are scaled by the same
    factor. None when no input is that large."""
    from caffepy.proto import caffe_pb2
    shapes = [s for lp in param.layer for s in _input_shapes(lp) if _is_image(s)]
    big = max([s.dim[0] * s.dim[2] * s.dim[3] for s in shapes] or [0])
    if big <= side * side:
        return None
    factor = (side * side / float(big)) ** 0.5
    out = caffe_pb2.NetParameter()
    out.CopyFrom(param)
    for lp in out.layer:
        for s in filter(_is_image, _input_shapes(lp)):
            for axis in (2, 3):
                s.dim[axis] = max(MIN_SIDE, int(round(s.dim[axis] * factor / 32)) * 32)
        if lp.type == "Interp":
            ip = lp.interp_param
            for name in ("height", "width"):
                if ip.HasField(name) and getattr(ip, name) > 0:
                    setattr(ip, name, max(1, int(round(getattr(ip, name) * factor))))
    return out
