"""Net debug info (Caffe's ``debug_info: true``) and NaN hunting.

With ``debug_info`` the solver runs display iterations layer by layer and logs, as Caffe's
``Net::ForwardDebugInfo`` / ``BackwardDebugInfo`` / ``UpdateDebugInfo`` do, the mean absolute value
``asum / count`` of every top's data, every bottom diff that is propagated, and every parameter's
data and diff::

    [Forward] Layer conv1, top blob conv1 data: 0.0421
    [Forward] Layer conv1, param blob 0 data: 0.0812
    [Backward] Layer conv1, bottom blob data diff: 1.2e-05
    [Backward] Layer conv1, param blob 0 diff: 0.0031
    [Update] Layer conv1, param 0 data: 0.0812; diff: 0.00012

:func:`locate_nonfinite` finds the first layer whose output is not finite (re-running the layers
that have bottoms one at a time, so in-place layers are blamed precisely) for the error that stops
training on a NaN or infinite loss.
"""
import numpy as np

from ..log import fmt, info


def _mean_abs(arr):
    return float(np.abs(arr).sum(dtype=np.float64)) / max(arr.size, 1)


def _param_name(net, layer_index, k):
    try:
        spec = net.layers[layer_index].layer_param.param
        if k < len(spec) and spec[k].name:
            return spec[k].name
    except AttributeError:
        pass
    return str(k)


def forward_debug(net, i):
    name = net._layer_names[i]
    for blob_name, blob in zip(net._wiring[i][1], net.top_vecs[i]):
        info("net.cpp:591", "    [Forward] Layer %s, top blob %s data: %s"
                 % (name, blob_name, fmt(_mean_abs(blob.data))))
    for k, blob in enumerate(net.layers[i].blobs):
        info("net.cpp:603", "    [Forward] Layer %s, param blob %s data: %s"
                 % (name, _param_name(net, i, k), fmt(_mean_abs(blob.data))))


def backward_debug(net, i):
    name = net._layer_names[i]
    need = net.bottom_need_backward[i]
    for j, (blob_name, blob) in enumerate(zip(net._wiring[i][0], net.bottom_vecs[i])):
        if need[j]:
            info("net.cpp:619", "    [Backward] Layer %s, bottom blob %s diff: %s"
                     % (name, blob_name, fmt(_mean_abs(blob.diff))))
    layer = net.layers[i]
    for k, blob in enumerate(layer.blobs):
        if k < len(layer.param_propagate_down) and layer.param_propagate_down[k]:
            info("net.cpp:630", "    [Backward] Layer %s, param blob %d diff: %s"
                     % (name, k, fmt(_mean_abs(blob.diff))))


def update_debug(net):
    where = getattr(net, "param_layer_indices", None)
    for pid, blob in enumerate(net.learnable_params):
        li, k = where[pid] if where else (None, pid)
        layer = net._layer_names[li] if li is not None else "?"
        display = _param_name(net, li, k) if li is not None else str(k)
        info("net.cpp:641", "    [Update] Layer %s, param %s data: %s; diff: %s"
                 % (layer, display, fmt(_mean_abs(blob.data)), fmt(_mean_abs(blob.diff))))


def forward_only_debug(net):
    """One forward pass, logging every layer (test nets with debug_info); returns the loss."""
    loss = 0.0
    for i in range(len(net.layers)):
        loss += net.forward_from_to(i, i)
        forward_debug(net, i)
    return loss


def forward_backward_debug(net):
    """One forward/backward pass, logging every layer as Caffe does with debug_info; returns loss."""
    loss = forward_only_debug(net)
    for i in range(len(net.layers) - 1, -1, -1):
        net.backward_from_to(i, i)
        if net.layer_need_backward[i]:
            backward_debug(net, i)
    return loss


def _finite(arr):
    return bool(np.isfinite(arr).all())


def locate_nonfinite(net):
    """``(layer_index, top_name)`` of the first layer whose output is not finite, or None."""
    for i, layer in enumerate(net.layers):
        if net.bottom_vecs[i]:
            net.forward_from_to(i, i)
        for top_name, blob in zip(net._wiring[i][1], net.top_vecs[i]):
            if not _finite(blob.data):
                return i, top_name
    return None


def nonfinite_message(net, it, loss):
    """A one-line description of where a non-finite loss came from."""
    found = locate_nonfinite(net)
    head = "iteration %d: loss = %s" % (it, fmt(loss))
    if found is None:
        return head + "; every layer output is finite (the loss layer itself overflowed)"
    i, top = found
    layer = net.layers[i]
    bad_params = [str(k) for k, b in enumerate(layer.blobs) if not _finite(b.data)]
    bad_inputs = [n for n, b in zip(net._wiring[i][0], net.bottom_vecs[i])
                  if not _finite(b.data)]
    why = ""
    if bad_params:
        why = " (its param blob %s is non-finite)" % ", ".join(bad_params)
    elif bad_inputs:
        why = " (its bottom %s is non-finite)" % ", ".join(bad_inputs)
    return ("%s; first non-finite output: top '%s' of layer '%s' (%s)%s"
            % (head, top, net._layer_names[i], layer.layer_param.type, why))
