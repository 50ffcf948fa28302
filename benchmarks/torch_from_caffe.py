"""A torch.nn.Module built from a caffepy Net, layer by layer, for the CPU training benchmark.

    model = TorchNet(net)                      # net: a built caffepy Net (TRAIN or TEST)
    blobs = model(data=x, label=y)             # {blob name: tensor}, the data layers' tops given
    model.loss(blobs).backward()               # sum of loss weight * loss top, as caffepy

Walks ``net.layers`` in order with their ``layer_param`` and bottom / top names; a blob name
maps to a tensor, so in-place layers, Split (every top is the bottom's tensor) and branches
need no special handling. Converted types: Convolution (2-d: group, pad, stride, dilation,
bias_term), Pooling MAX / AVE / global (torch's ``ceil_mode`` and ``count_include_pad`` give
Caffe's output size and AVE divisor: the window clipped to the padded image), LRN
ACROSS_CHANNELS (``nn.LocalResponseNorm``: both divide alpha by the size), ReLU
(negative_slope; in place where Caffe's is), InnerProduct (axis 1: flattens from axis 1),
Dropout, Concat, Eltwise SUM (coefficients), BatchNorm (no affine; batch statistics unless the
caffepy layer uses the global ones; torch keeps its own running averages, momentum
1 - moving_average_fraction), Scale (one bottom, per-channel, bias_term), Split, Softmax and
SoftmaxWithLoss (cross entropy with the label as class index; normalization VALID, the
default; ignore_label). Data layers (Input, DummyData, ...) are not converted: their tops are
the forward's keyword arguments. Anything else, or a convolution / pooling field not named here
(a fork's asymmetric padding, ...), raises NotImplementedError.

The parameters are copies of the Net's (``copy_weights``), so both compute the same function;
``check_shapes`` runs one forward on zeros and compares every blob's shape with the Net's.
``params`` lists (layer name, blob index, torch parameter) to compare gradients with the Net's
diffs.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from caffepy.proto import caffe_pb2, is_repeated


def _pair(p, name, h_name, w_name, default):
    """(h, w) of ``name`` (repeated: 0, 1 or 2 values; or one value) or its ``*_h`` / ``*_w``."""
    if p.HasField(h_name) or p.HasField(w_name):
        return getattr(p, h_name), getattr(p, w_name)
    field = p.DESCRIPTOR.fields_by_name[name]
    if not is_repeated(field):
        return (getattr(p, name),) * 2 if p.HasField(name) else (default, default)
    vals = list(getattr(p, name))
    if len(vals) > 2:
        raise NotImplementedError("only 2-d %s" % name)
    return (tuple(vals) * 2)[:2] if vals else (default, default)


_GEOMETRY = ("kernel_size", "kernel_h", "kernel_w", "stride", "stride_h", "stride_w", "pad",
             "pad_h", "pad_w", "engine")


def _only(lp, p, *known):
    """Raise for a field of ``p`` set beyond ``known`` (the fork fields caffepy reads too)."""
    extra = [f.name for f, _ in p.ListFields() if f.name not in known + _GEOMETRY]
    if extra:
        raise NotImplementedError("%s %s: no conversion of %s" % (lp.type, lp.name,
                                                                  ", ".join(extra)))


class _Scale(nn.Module):
    """y = x * scale[c] (+ bias[c]) along axis 1."""

    def __init__(self, channels, bias_term):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels)) if bias_term else None

    def forward(self, x):
        shape = (-1,) + (1,) * (x.dim() - 2)
        y = x * self.weight.view(shape)
        return y + self.bias.view(shape) if self.bias is not None else y


class _BatchNorm(nn.Module):
    """Caffe's BatchNorm: no affine part; batch statistics, or the global ones."""

    def __init__(self, channels, eps, momentum, use_global_stats):
        super().__init__()
        self.eps, self.momentum, self.use_global_stats = eps, momentum, use_global_stats
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, None, None,
                            not self.use_global_stats, self.momentum, self.eps)


class _Fn(nn.Module):
    """A parameterless layer: ``fn(*bottoms)``."""

    def __init__(self, fn, what):
        super().__init__()
        self.fn, self.what = fn, what

    def forward(self, *xs):
        return self.fn(*xs)

    def extra_repr(self):
        return self.what


def _softmax_loss(lp):
    p = lp.loss_param
    if p.HasField("normalization") and p.normalization != p.VALID or \
            not p.HasField("normalization") and p.HasField("normalize") and not p.normalize:
        raise NotImplementedError("SoftmaxWithLoss: only normalization VALID")
    axis = lp.softmax_param.axis
    ignore = p.ignore_label if p.HasField("ignore_label") else -100

    def loss(x, label):
        if axis != 1:
            x = x.movedim(axis, 1)
        return F.cross_entropy(x, label.reshape((x.shape[0],) + x.shape[2:]).long(),
                               ignore_index=ignore)
    return _Fn(loss, "SoftmaxWithLoss")


def _convert(layer, lp, shapes):
    """(module, [(blob index, torch parameter or buffer setter)]) of one caffepy layer."""
    t, blobs = lp.type, layer.blobs
    if t == "Convolution":
        p = lp.convolution_param
        _only(lp, p, "num_output", "bias_term", "dilation", "dilation_h", "dilation_w", "group",
              "weight_filler", "bias_filler", "axis", "force_nd_im2col")
        if len(shapes[0]) != 4 or p.axis != 1:
            raise NotImplementedError("Convolution: only 2-d, axis 1")
        kernel = _pair(p, "kernel_size", "kernel_h", "kernel_w", 0)
        m = nn.Conv2d(shapes[0][1], p.num_output, kernel, _pair(p, "stride", "stride_h",
                      "stride_w", 1), _pair(p, "pad", "pad_h", "pad_w", 0),
                      _pair(p, "dilation", "dilation_h", "dilation_w", 1), p.group, p.bias_term)
        return m, [m.weight, m.bias] if p.bias_term else [m.weight]
    if t == "InnerProduct":
        p = lp.inner_product_param
        if p.axis != 1 or p.transpose:
            raise NotImplementedError("InnerProduct: only axis 1, no transpose")
        m = nn.Linear(int(np.prod(shapes[0][1:])), p.num_output, p.bias_term)
        seq = nn.Sequential(nn.Flatten(1), m)
        return seq, [m.weight, m.bias] if p.bias_term else [m.weight]
    if t == "Pooling":
        p = lp.pooling_param
        _only(lp, p, "pool", "global_pooling", "round_mode", "ceil_mode")
        ceil = p.round_mode == p.CEIL and getattr(p, "ceil_mode", True)
        if p.global_pooling:
            kernel, stride, pad = tuple(shapes[0][2:]), 1, 0
        else:
            kernel = _pair(p, "kernel_size", "kernel_h", "kernel_w", 0)
            stride = _pair(p, "stride", "stride_h", "stride_w", 1)
            pad = _pair(p, "pad", "pad_h", "pad_w", 0)
        if p.pool == p.MAX:
            return nn.MaxPool2d(kernel, stride, pad, ceil_mode=ceil), []
        if p.pool == p.AVE:
            return nn.AvgPool2d(kernel, stride, pad, ceil_mode=ceil, count_include_pad=True), []
        raise NotImplementedError("Pooling: only MAX and AVE")
    if t == "LRN":
        p = lp.lrn_param
        if p.norm_region != p.ACROSS_CHANNELS:
            raise NotImplementedError("LRN: only ACROSS_CHANNELS")
        return nn.LocalResponseNorm(p.local_size, p.alpha, p.beta, p.k), []
    if t == "ReLU":
        inplace = list(lp.top) == list(lp.bottom)
        slope = lp.relu_param.negative_slope
        return (nn.LeakyReLU(slope, inplace) if slope else nn.ReLU(inplace)), []
    if t == "Dropout":
        p = lp.dropout_param
        if not getattr(p, "scale_train", True):
            raise NotImplementedError("Dropout: only scale_train true")
        return nn.Dropout(p.dropout_ratio), []
    if t == "Concat":
        p = lp.concat_param
        axis = p.concat_dim if p.HasField("concat_dim") and not p.HasField("axis") else p.axis
        return _Fn(lambda *xs: torch.cat(xs, axis), "Concat axis %d" % axis), []
    if t == "Eltwise":
        p = lp.eltwise_param
        if p.operation != p.SUM:
            raise NotImplementedError("Eltwise: only SUM")
        coeff = list(p.coeff) or [1.0] * len(lp.bottom)

        def eltwise_sum(*xs):
            y = xs[0] if coeff[0] == 1 else coeff[0] * xs[0]
            for c, x in zip(coeff[1:], xs[1:]):
                y = y + x if c == 1 else y + c * x
            return y
        return _Fn(eltwise_sum, "Eltwise SUM %s" % coeff), []
    if t == "BatchNorm":
        p = lp.batch_norm_param
        if len(blobs) != 3:
            raise NotImplementedError("BatchNorm: only the three statistics blobs")
        m = _BatchNorm(shapes[0][1], p.eps, 1.0 - p.moving_average_fraction,
                       layer.use_global_stats)
        s = float(blobs[2].data.reshape(-1)[0])
        f = 0.0 if s == 0 else 1.0 / s
        m.running_mean.copy_(torch.from_numpy(f * blobs[0].data))
        if s:
            m.running_var.copy_(torch.from_numpy(f * blobs[1].data))
        return m, []
    if t == "Scale":
        p = lp.scale_param
        if len(lp.bottom) != 1 or p.axis != 1 or p.num_axes != 1:
            raise NotImplementedError("Scale: only one bottom, axis 1, num_axes 1")
        m = _Scale(shapes[0][1], p.bias_term)
        return m, [m.weight, m.bias] if p.bias_term else [m.weight]
    if t == "Split":
        return _Fn(lambda x: x, "Split"), []
    if t == "Softmax":
        axis = lp.softmax_param.axis
        return _Fn(lambda x: F.softmax(x, axis), "Softmax axis %d" % axis), []
    if t == "SoftmaxWithLoss":
        return _softmax_loss(lp), []
    raise NotImplementedError("no torch conversion of layer type %s" % t)


DATA_TYPES = ("Input", "DummyData", "Data", "ImageData", "HDF5Data", "MemoryData", "WindowData")


class TorchNet(nn.Module):
    """The caffepy ``net`` as a torch module (see the module docstring)."""

    def __init__(self, net, copy_weights=True, check_shapes=True):
        super().__init__()
        self.steps = []                 # (module index, layer name, bottom names, top names)
        self.inputs = []
        self.params = []                # (layer name, blob index, torch parameter)
        self.loss_weights = {n: w for n, w in net.blob_loss_weights.items() if w}
        modules = []
        for layer, name in zip(net.layers, net._layer_names):
            lp = layer.layer_param
            bottoms, tops = net.bottom_names[name], net.top_names[name]
            if lp.type in DATA_TYPES:
                self.inputs.extend(tops)
                continue
            m, params = _convert(layer, lp, [tuple(net.blobs[b].shape) for b in bottoms])
            if len(params) != (len(layer.blobs) if lp.type != "BatchNorm" else 0):
                raise NotImplementedError("layer %s (%s): %d parameter blobs, %d converted"
                                          % (name, lp.type, len(layer.blobs), len(params)))
            for k, tp in enumerate(params):
                want = tuple(layer.blobs[k].shape)
                if tuple(tp.shape) != want:
                    raise ValueError("layer %s: torch parameter %d has shape %s, caffepy's %s"
                                     % (name, k, tuple(tp.shape), want))
                if copy_weights:
                    with torch.no_grad():
                        tp.copy_(torch.from_numpy(np.ascontiguousarray(layer.blobs[k].data)))
                self.params.append((name, k, tp))
            self.steps.append((len(modules), name, list(bottoms), list(tops)))
            modules.append(m)
        self.layers = nn.ModuleList(modules)
        self.train(net.phase == caffe_pb2.TRAIN)
        if check_shapes:
            self._check_shapes(net)

    def forward(self, **inputs):
        blobs = dict(inputs)
        for i, _, bottoms, tops in self.steps:
            out = self.layers[i](*[blobs[b] for b in bottoms])
            for t in tops:              # Split: every top is the bottom's tensor
                blobs[t] = out
        return blobs

    def loss(self, blobs):
        """The loss Net.forward_backward returns: sum of loss weight * sum(loss top)."""
        total = 0.0
        for name, w in self.loss_weights.items():
            total = total + w * blobs[name].sum()
        return total

    def _check_shapes(self, net):
        inputs = {n: torch.zeros(tuple(net.blobs[n].shape)) for n in self.inputs}
        saved = [b.clone() for b in self.buffers()]     # BatchNorm's running averages
        with torch.no_grad():
            blobs = self(**inputs)
            for b, s in zip(self.buffers(), saved):
                b.copy_(s)
        for name, t in blobs.items():
            want = tuple(net.blobs[name].shape)
            if tuple(t.shape) != want:
                raise ValueError("blob %s: torch shape %s, caffepy's %s"
                                 % (name, tuple(t.shape), want))
