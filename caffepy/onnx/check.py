"""Run an exported model in onnxruntime and compare every output with caffepy's forward.

The error of an output is max |onnx - caffe| / max(max |caffe|, 1e-30): the largest deviation
relative to the output's largest magnitude (a per-element ratio would blow up where Caffe's value
crosses zero). ``check`` feeds the same random inputs to both (``export.random_inputs``: gaussian
images, image-sized ``im_info``, valid ``rois``).
"""
import numpy as np

from .builder import ExportError

DEFAULT_RTOL = 1e-4


def session(model):
    """An onnxruntime CPU session for a ModelProto or a path."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def relative_error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    if want.size == 0:
        return 0.0
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def compare(net, model, seed=0, forward=None):
    """{output name: relative error} for one random input batch. ``forward(net)`` runs caffepy
    (default ``net.forward()``)."""
    from .export import output_blobs, random_inputs
    feeds = random_inputs(net, seed)
    for name, value in feeds.items():
        net.blobs[name].data[...] = value
    (forward or (lambda n: n.forward()))(net)
    try:
        sess = session(model)
        names = [o.name for o in sess.get_outputs()]
        got = sess.run(names, {i.name: feeds[i.name] for i in sess.get_inputs()})
    except Exception as e:      # noqa: BLE001 -- onnxruntime's own classes derive from Exception
        if not type(e).__module__.startswith("onnxruntime"):
            raise
        raise ExportError("onnxruntime cannot run the exported model: %s"
                          % " ".join(str(e).split())[:300]) from None
    blobs = output_blobs(model) if not isinstance(model, (str, bytes)) else names
    return {b: relative_error(g, net.blobs[b].data) for b, g in zip(blobs, got)}


def check(net, model, rtol=DEFAULT_RTOL, seed=0, forward=None):
    """``compare``, raising ExportError naming the worst output beyond ``rtol``."""
    errors = compare(net, model, seed, forward)
    worst = max(errors, key=errors.get)
    if not errors[worst] <= rtol:
        raise ExportError("onnxruntime differs from caffepy on output '%s': relative error %.3g "
                          "> %g" % (worst, errors[worst], rtol))
    return errors
