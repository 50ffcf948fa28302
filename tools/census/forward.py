"""The ``runnable`` tier of tools/census/measure.py: one forward pass of a net file with cheap
random weights, in a forked child with a time limit (see measure.py's module doc)."""
import os
import sys
import tempfile
import time

import zoo_survey as Z


def _batch_one(net):
    """Give every input whose first axis is over 1 a first axis of 1 and reshape the net, as a
    pycaffe script does before classifying one image; a net that does not take it (a Reshape or
    a layer with the batch written in) keeps its declared shapes."""
    declared = {name: net.blobs[name].shape for name in net.inputs}
    if not any(len(s) and s[0] > 1 for s in declared.values()):
        return
    try:
        for name, shape in declared.items():
            if len(shape) and shape[0] > 1:
                net.blobs[name].reshape((1,) + tuple(shape[1:]))
        net.reshape()
    except Exception:       # noqa: BLE001 -- any refusal: back to the declared shapes
        for name, shape in declared.items():
            net.blobs[name].reshape(shape)
        net.reshape()


def _forward(path, phase="TEST"):
    """The child of ``runnable``: build with random weights in ``phase`` (in the phase a
    PhaseError names where the net's data layers are only there, as caffepy summary shows it),
    feed inputs, run forward."""
    import numpy as np
    import caffepy
    from caffepy import zoo
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2
    caffepy.set_random_seed(0)
    param = zoo.constant_fillers(zoo.read_for_run(path))
    from caffepy.net.passes import PhaseError
    try:
        net = Net(param, caffe_pb2.Phase.Value(phase))
    except PhaseError as e:
        if e.phase is None or e.stages:
            raise
        net = Net(param, e.phase)
    zoo.randomize_params(net, 0)
    _batch_one(net)
    for name, values in zoo.net_input_values(net, np.random.default_rng(0)).items():
        net.blobs[name].data[...] = values
    zoo.forward_releasing(net, calibrate=True)
    for name in net.outputs:
        data = np.asarray(net.blobs[name].data)
        if data.size and not np.isfinite(data).all():
            raise ValueError("output '%s' is not finite" % name)
    return 0


def run_forward(path, timeout=Z.TIMEOUT, prepare=None, phase="TEST"):
    """(ok, one-line error, category) of the forward pass in ``phase``, in a forked child."""
    import caffepy.cli  # noqa: F401 -- imported before forking
    import functools
    rc, _, err, _ = _fork(functools.partial(_forward, phase=phase), path, timeout, prepare)
    if rc == 0:
        return True, "", None
    if rc == "timeout":
        return False, "timeout (%ds)" % timeout, "timeout"
    return False, Z.last_line(err), "forward"


def _fork(fn, arg, timeout, prepare=None):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.time()
        pid = os.fork()
        if pid == 0:
            rc = 70
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False)
                sys.stderr = open(2, "w", closefd=False)
                try:
                    if prepare is not None:
                        prepare()
                    rc = fn(arg)
                except BaseException as e:
                    sys.stderr.write("%s: %s\n" % (type(e).__name__, " ".join(str(e).split())))
                    rc = 1
            finally:
                sys.stderr.flush()
                os._exit(rc)
        rc = Z.wait_child(pid, t0, timeout)
        err.seek(0)
        return rc, "", err.read().decode("utf-8", "replace"), time.time() - t0
