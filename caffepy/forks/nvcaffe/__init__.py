"""NVIDIA Caffe (NVCaffe) and DIGITS' DetectNet.

Modules: ``batchnorm`` (BatchNorm with ``scale_bias``, a variant of BVLC's), ``trt`` (``TRT``,
refused with one line), ``detectnet_transform`` (DetectNetTransformation). NVCaffe's raw fp16 /
fp32 / fp64 caffemodel blobs are read by :func:`caffepy.proto.packed.raw_blob_values`.
Built-in Python layers (``detectnet``): ``caffe.layers.detectnet.clustering`` ClusterDetections /
ClusterGroundtruth and ``caffe.layers.detectnet.mean_ap`` ScoreDetections / mAP.
Schema: proto/additions.d/nvcaffe_yolo_ssd.json.
"""
from ...layers.python_layer import register_stand_in

for _module, _layer, _target in [
        ('caffe.layers.detectnet.clustering', 'ClusterDetections', 'detectnet:ClusterDetections'),
        ('caffe.layers.detectnet.clustering', 'ClusterGroundtruth', 'detectnet:ClusterGroundtruth'),
        ('caffe.layers.detectnet.mean_ap', 'ScoreDetections', 'detectnet:ScoreDetections'),
        ('caffe.layers.detectnet.mean_ap', 'mAP', 'detectnet:mAP'),
]:
    register_stand_in(_module, _layer, __name__ + "." + _target)
