"""NVIDIA Caffe's ``TRT`` layer: refused with one line that says why.

NVCaffe's TRT layer builds an NVIDIA TensorRT engine from another net (``trt_param { deploy model
trt_mode: FP32 | FP16 | INT8 calibrator deploy_outputs top_k }``) and runs it on the GPU in place
of the layers it stands for. caffepy has no TensorRT path (TensorRT needs an NVIDIA GPU and its
engine's numerics are TensorRT's), so the layer is registered only to give that error instead of
"unknown layer type": run the deploy net the layer names (with its caffemodel) directly.
"""
from ...layers.base import Layer, register_layer


@register_layer("TRT")
class TRTLayer(Layer):
    """Refused at set-up: NVCaffe's TensorRT engine layer cannot run in caffepy (see the module)."""

    def layer_setup(self, bottom, top):
        p = self.layer_param.trt_param
        raise self.error("NVCaffe's TRT layer runs a TensorRT engine (trt_mode %s) on an NVIDIA "
                         "GPU, which caffepy does not provide; build its deploy net %r (weights "
                         "%r) with caffepy instead"
                         % (type(p).TRTMode.Name(p.trt_mode), p.deploy, p.model))
