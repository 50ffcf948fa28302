"""The Pooling3D of Pseudo-3D ResNets (ZhaofanQiu/pseudo-3d-residual-networks, commit e91f95d,
caffe_add_layers/src/pooling3d_layer.cpp and caffe_add_layers/caffe.proto): Caffe's pooling rules
in three dimensions, with its own field names (``kernel_l`` / ``stride_l`` / ``pad_l`` for the
length axis)."""
from ...errors import ShapeError
from ...layers.base import register_variant
from .video3d import Pooling3DLayer

_OWN = ("kernel_l", "stride_l", "pad_l", "pad_h", "pad_w")


@register_variant("Pooling3D", lambda lp: any(lp.pooling3d_param.HasField(f) for f in _OWN))
class P3DPooling3DLayer(Pooling3DLayer):
    """P3D's Pooling3D over N x C x L x H x W, taken when a layer sets one of ``kernel_l``,
    ``stride_l``, ``pad_l``, ``pad_h``, ``pad_w``. Per axis (kernel k, stride s, pad p, size n):
    n' = ceil((n + 2p - k) / s) + 1, and when any pad is set, n' - 1 more windows only while the
    last starts inside the input (n' -= 1 if (n' - 1) s >= n + p). Window i spans
    [i s - p, i s - p + k) cut to the input.

      * MAX: the first maximum of the window (length, then height, then width order); dx routes
        dy to it;
      * AVE: the window's sum over the input divided by its size cut to the padded input
        (Caffe's rule); dx spreads dy / that size over the window.

    prototxt: ``pooling3d_param { pool: MAX kernel_l kernel_size (or kernel_h kernel_w)
    stride_l: 1 stride: 1 (or stride_h stride_w) pad_l: 0 pad: 0 (or pad_h pad_w)
    global_pooling: false }`` (global: the kernel is the whole input, pads 0, strides 1).
    STOCHASTIC (the fork's NOT_IMPLEMENTED) and its optional mask top are refused.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.pooling3d_param
        pb = self._caffe_pb2.PoolingParameter
        if p.pool not in (pb.MAX, pb.AVE):
            raise self.error("Pooling3D supports MAX and AVE only (the fork's STOCHASTIC is not "
                             "implemented)")
        self.max = p.pool == pb.MAX
        self.global_pooling = p.global_pooling
        has = p.HasField
        if has("pad_h") != has("pad_w") or (has("pad") and has("pad_h")):
            raise self.error("pad is pad OR pad_h and pad_w")
        if has("stride_h") != has("stride_w") or (has("stride") and has("stride_h")):
            raise self.error("stride is stride OR stride_h and stride_w")
        pad = (p.pad_h, p.pad_w) if has("pad_h") else (p.pad, p.pad)
        stride = (p.stride_h, p.stride_w) if has("stride_h") else (p.stride, p.stride)
        self.pad = (int(p.pad_l),) + tuple(int(v) for v in pad)
        self.stride = (int(p.stride_l),) + tuple(int(v) for v in stride)
        if self.global_pooling:
            if has("kernel_size") or has("kernel_h") or has("kernel_w"):
                raise self.error("with global_pooling: true the filter size cannot be specified")
            if any(self.pad) or any(s != 1 for s in self.stride):
                raise self.error("with global_pooling: true only pad = 0 and stride = 1")
            self.kernel = None
        else:
            if has("kernel_size") == (has("kernel_h") and has("kernel_w")):
                raise self.error("filter size is kernel_size OR kernel_h and kernel_w")
            if not has("kernel_l"):
                raise self.error("kernel_l is required (with kernel_size or kernel_h / kernel_w)")
            hw = (p.kernel_h, p.kernel_w) if has("kernel_h") else (p.kernel_size,) * 2
            self.kernel = (int(p.kernel_l),) + tuple(int(v) for v in hw)
            if min(self.kernel) < 1:
                raise self.error("filter dimensions cannot be zero")
            if any(pd >= k for pd, k in zip(self.pad, self.kernel)):
                raise self.error("each pad must be smaller than its kernel size")
        if min(self.stride) < 1:
            raise self.error("strides must be >= 1")

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 5:
            raise self.error("bottom must be N x C x L x H x W, got %s" % (bottom[0].shape,),
                             ShapeError)
        size = bottom[0].shape[2:]
        if self.global_pooling:
            self.kernel = tuple(size)
        out = [-(-(n + 2 * p - k) // s) + 1
               for n, k, s, p in zip(size, self.kernel, self.stride, self.pad)]
        if any(self.pad):
            out = [o - 1 if (o - 1) * s >= n + p else o
                   for o, n, s, p in zip(out, size, self.stride, self.pad)]
        self.out = tuple(out)
        if min(self.out) < 1 or any(n + 2 * p < k for n, k, p in zip(size, self.kernel, self.pad)):
            raise self.error("the kernel does not fit the input %s" % (bottom[0].shape,),
                             ShapeError)
        top[0].reshape(tuple(bottom[0].shape[:2]) + self.out)
