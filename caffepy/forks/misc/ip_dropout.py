"""RuWang15/caffe_pr's ``InnerProductDropout``: an InnerProduct whose GPU training path drops
input columns in a strided pattern; its CPU path, the one caffepy follows, is the plain product."""
from ...errors import ShapeError
from ...layers.base import register_layer
from ...layers.inner_product import InnerProductLayer


@register_layer("InnerProductDropout")
class InnerProductDropoutLayer(InnerProductLayer):
    """src/caffe/layers/inner_product_dropout_layer.cpp of RuWang15/caffe_pr. Forward_cpu and
    Backward_cpu are InnerProduct's (y = x W^T + b, or x W + b with ``transpose``; the same
    gradients), read from ``inner_product_dropout_param { num_output bias_term: true
    weight_filler bias_filler axis: 1 transpose: false seq_addr }``.

    ``seq_addr`` names a text file (a count, then that many retention periods T) that LayerSetUp
    reads and shuffles; only the fork's CUDA forward uses it: for a batch of more than one row it
    takes the next T and a random start s in [0, T) and sums over the input columns s, s + T,
    s + 2T, ... alone (caffe_gpu_gemm_ipdf, no rescaling), with matching backward GEMMs. That
    GPU-only path is not reproduced: the file is not read, and the layer computes what the fork
    computes in CPU mode.
    """

    def _param(self):
        return self.layer_param.inner_product_dropout_param

    def layer_setup(self, bottom, top):
        p = self._param()
        self.num_output = p.num_output
        if self.num_output <= 0:
            raise self.error("inner_product_dropout_param.num_output must be positive")
        self.bias_term = p.bias_term
        self.transpose = p.transpose
        self.axis = bottom[0].canonical_axis_index(p.axis)
        self.k = bottom[0].count_range(self.axis)
        wshape = (self.k, self.num_output) if self.transpose else (self.num_output, self.k)
        shapes = [wshape] + ([(self.num_output,)] if self.bias_term else [])
        self.init_param_blobs(shapes, p.weight_filler, p.bias_filler)
        self.param_propagate_down = [True] * len(self.blobs)

    def reshape(self, bottom, top):
        axis = bottom[0].canonical_axis_index(self._param().axis)
        k = bottom[0].count_range(axis)
        if k != self.k:
            raise self.error("input size incompatible with the layer's parameters: %d inputs "
                             "per row (shape %s), expected %d" % (k, bottom[0].shape, self.k),
                             ShapeError)
        self.m = bottom[0].count_range(0, axis)
        top[0].reshape(bottom[0].shape[:axis] + (self.num_output,))
