"""Model-zoo helpers: run a train/val or deploy net without its data files.

``replace_data_layers(net_param)`` returns a copy of a NetParameter in which every layer that reads
data from outside the net (Data, ImageData, HDF5Data, AnnotatedData, WindowData, MemoryData,
VideoData, the fork image/segmentation readers, and Python layers without bottoms) becomes an
``Input`` layer with the same name, tops and include/exclude rules, and the shape the original
would produce:

* batch: ``batch_size`` argument if given, else the layer's own batch_size (a Python layer's
  ``batch_size`` in its ``param_str``; 1 when it has none);
* image top (the first, unless its name says label, does not end with data / image / img
  (``labeled_data`` is an image) and the reader is not ImageData / LabelData): channels from
  ``is_color`` (3 / 1), else 3
  (MNIST-like sources: 1 x 28 x 28, 2 channels for siamese pair sources; CIFAR-like: 3 x 32 x 32);
  size from ``transform_param.crop_size``, else ``new_height``/``new_width``, else
  ``memory_data_param``, else the AnnotatedData ``resize_param``, else ``default_shape``
  (SegNet's DenseImageData without crop or resize sizes: 360 x 480, the CamVid images its
  published nets hard-code in their Upsample sizes);
* other tops by name: labels ``(N,)`` (``(N, 1, H, W)`` for segmentation readers), ``im_info``
  ``(N, 3)``, ``gt_boxes`` / ``rois`` ``(1, 5)``, ``bbox_*`` ``(1, 4 * num_classes)`` (from the
  Python layer's ``param_str``), AnnotatedData labels ``(1, 1, 1, 8)`` (MobileNet-YOLO's
  ``yolo_data_type: 1``: ``(N, 1, 300, 5)``), a GuidedDropout's guidance ``(N, C, 1, 1)`` (C from
  the InnerProduct / Convolution its first bottom comes from), caffe-yolo's BoxData
  labels ``(N, 7 side^2)`` (``data_param.side``, default 7); a top that a
  ``DetectNetTransformation`` reads as its labels ``(N, 1, 2, 16)`` (DIGITS' header row and one
  box), PG-CNN's MultiLabelImageData labels ``(N, label_num)`` (its image sized like ImageData's,
  from ``multi_label_image_data_param``); RMPE's DataHeatmap images (N, 3, outsize, outsize) and
  heat maps (N, J, label_height, label_width) (J from ``labelinds``, else learned); a MemoryData
  with ``dim`` (the OpenCL branch's N-d form) that whole shape, its label (N, 1, ..., 1);
* fork readers with their own rules: MSCNN / Cascade R-CNN (caffepy.forks.detection.zoo_mscnn),
  car_keypoint_caffe's HeatmapData, custom-caffe's ImageFloatData, PicPac
  (caffepy.forks.misc.zoo_readers), and dementrock/caffe's MemoryData forms (their declared
  shapes, one per top).

Sizes a file does not declare are searched by :func:`caffepy.zoo.input_search.infer_input_shapes`
(what ``caffepy summary`` uses): the first candidate size with which every shape check passes.

The running side (``read_for_run``, ``input_values``, ``fill_unset_num_output``,
``constant_fillers``, ``randomize_params``, ``forward_releasing``: the file's text read as summary
reads it, values for those inputs, cheap random weights, a forward that frees blobs as it goes) is in :mod:`caffepy.zoo.run`; its names are also reachable
here.
"""
from ..proto import caffe_pb2
from ..forks.detection import zoo_mscnn
from ..forks.misc import zoo_pulkitag
from ..forks.misc import pose_data, zoo_readers
from ..forks.face import landmark_regression
from ..forks.pose import car_keypoint
from ..forks.video import sparse_data
from .data_shapes import (  # noqa: F401 -- the data-layer names are also reachable here
    DATA_LAYER_TYPES, IMAGE_FIRST, IMAGE_NAMES, SEGMENTATION_TYPES, declared_label_width,
    is_data_layer, _batch, _cpm_shapes, _custom_data_shapes, _flow_size,
    _guided_dropout_channels, _heatmap_shapes, _memory_blob_shapes, _memory_nd_shapes,
    _top_shapes, _yolo_seg_label_channels, _yolo_seg_label_shape)
from .run import (constant_fillers, fill_unset_num_output, forward_releasing, read_for_run,  # noqa: F401
                  input_values, net_input_values, randomize_params)


def replace_data_layers(net_param, default_shape=(3, 224, 224), batch_size=None, guess=True):
    """A copy of ``net_param`` with its data layers swapped for Input layers (see module doc).

    ``guess=False`` leaves out the size guesses made from outside the file (MNIST / CIFAR
    sources, SegNet's 360 x 480), so ``default_shape`` stands for every size the file does not
    declare (caffepy.zoo.input_search uses this to tell declared sizes from guessed ones)."""
    out = caffe_pb2.NetParameter()
    out.CopyFrom(net_param)
    del out.layer[:]
    detectnet_labels = {lp.bottom[1] for lp in net_param.layer
                        if lp.type == "DetectNetTransformation" and len(lp.bottom) > 1}
    seg_labels = _yolo_seg_label_channels(net_param)
    region_labels = {lp.bottom[1] for lp in net_param.layer     # gklz1982/caffe-yolov2's
                     if lp.type == "RegionLoss" and len(lp.bottom) > 1}   # BoxData: 30 x 5
    guidance = _guided_dropout_channels(net_param)
    for lp in net_param.layer:
        if not is_data_layer(lp):
            out.layer.add().CopyFrom(lp)
            continue
        new = out.layer.add()
        new.name = lp.name
        new.type = "Input"
        new.top.extend(lp.top)
        new.include.extend(lp.include)
        new.exclude.extend(lp.exclude)
        if lp.HasField("phase"):
            new.phase = lp.phase
        if lp.type in zoo_mscnn.TYPES:       # MSCNN / Cascade R-CNN readers
            shapes = zoo_mscnn.top_shapes(lp, default_shape, batch_size)
        elif lp.type in zoo_pulkitag.TYPES:   # pulkitag/caffe's window readers
            shapes = zoo_pulkitag.top_shapes(lp, net_param, default_shape, batch_size)
        elif lp.type == "CustomData":
            shapes = _custom_data_shapes(lp, _batch(lp, batch_size), _flow_size(net_param))
        elif lp.type == "CPMData":
            shapes = _cpm_shapes(lp, _batch(lp, batch_size))
        elif lp.type == "FloData":           # segaware's .flo reader: (u, v) planes
            shapes = [(_batch(lp, batch_size), 2) + tuple(default_shape[1:])]
        elif lp.type == "DataHeatmap":
            shapes = _heatmap_shapes(lp, batch_size)
        elif lp.type == "MemoryData" and len(lp.memory_data_param.dim):
            shapes = _memory_nd_shapes(lp, batch_size)
        elif lp.type == "PoseData":          # the DeViSE forks' image + pose reader
            shapes = pose_data.top_shapes(lp, default_shape, batch_size)
        elif lp.type in zoo_readers.TYPES:   # fork readers caffepy does not build
            shapes = zoo_readers.top_shapes(lp, default_shape, batch_size)
        elif lp.type == "ImageFloatData":    # goodluckcwl/custom-caffe
            shapes = landmark_regression.top_shapes(lp, default_shape, batch_size)
        elif lp.type == "HeatmapData":       # hhy5277/car_keypoint_caffe
            shapes = car_keypoint.top_shapes(lp, default_shape, batch_size)
        elif lp.type == "SparseData" and lp.HasField("sparse_data_param"):   # yjxiong/caffe
            shapes = sparse_data.top_shapes(lp, batch_size)
        elif lp.type == "MemoryData" and _memory_blob_shapes(lp, batch_size):
            shapes = _memory_blob_shapes(lp, batch_size)
        else:
            shapes = _top_shapes(lp, default_shape, batch_size, guess)
        for top, shape in zip(lp.top, shapes):
            if top in detectnet_labels:      # DIGITS' DetectNet label: header row + one box row
                shape = (shape[0], 1, 2, 16)
            if top in region_labels and lp.type == "BoxData":
                shape = (shape[0], 150)
            if top in guidance:              # GuidedDropout guidance: N x C x 1 x 1
                shape = (shape[0], guidance[top], 1, 1)
            if top in seg_labels and lp.type == "AnnotatedData" and len(shapes[0]) == 4:
                shape = _yolo_seg_label_shape(lp, shapes[0], seg_labels[top])
            if lp.type == "LaneData" and top != lp.top[0]:   # MobileNet-YOLO's lane reader:
                shape = ((shapes[0][0], 1, 1, 1) if top == lp.top[1]    # (N, 1, 1, 1) label,
                         else _yolo_seg_label_shape(lp, shapes[0], 1))  # a 1-channel lane map
            new.input_param.shape.add().dim.extend(shape)
    return out
