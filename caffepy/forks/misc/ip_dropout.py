"""RuWang15/caffe_pr's ``InnerProductDropout``: an InnerProduct whose GPU training path drops
input columns in a strided pattern; its CPU path, the one caffepy follows, is the plain product."""
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

    ip_param_field = "inner_product_dropout_param"
