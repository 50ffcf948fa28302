"""Top shapes of the data layers of zhaoweicai/mscnn and zhaoweicai/cascade-rcnn, for
``caffepy.zoo``'s data-layer substitution (their readers are not built into caffepy).

The shapes follow the forks' ``DataLayerSetUp`` (image_gt_data_layer.cpp, detection_data_layer.cpp,
eval_data_layer.cpp):

- ``ImageGtData`` (MSCNN, ``image_gt_data_param``): top 0 is N x C x H x W with the template size
  (``resize_width`` / ``resize_height``, then ``crop_width`` / ``crop_height`` when > 0); one label
  top per ``downsample_rate`` r: N x (2 + coord_num) x round(H / r) x round(W / r); with
  ``output_gt_boxes`` a last top G x 7 x 1 x 1 (G boxes of the batch; the fork's setup shape is 1).
- ``DetectionData`` (Cascade R-CNN, ``detection_data_param``): the template is ``resize_width`` x
  ``resize_height``, else ``short_size`` as the width and ``long_size`` as the height (the fork's
  order), then ``crop_width`` x ``crop_height`` or ``crop_short_size`` x ``crop_long_size``; one
  label top per ``stride`` s: N x (2 + coord_num) x round(H / s) x round(W / s); ``output_gt_boxes``
  adds G x 8 x 1 x 1.
- ``EvalData`` (Cascade R-CNN, ``eval_data_param``): N x C x H x W (``resize_*``, else
  ``short_size`` x ``long_size``), gt boxes G x 8 x 1 x 1, and with a third top the image sizes
  N x 2 x 1 x 1.

Sizes the file leaves to the first image fall back to the caller's default H x W.
"""

TYPES = frozenset(["ImageGtData", "DetectionData", "EvalData"])
GT_ROWS = 1   # the forks' own setup shape for the gt-box top (one row until a batch is read)


def _set(msg, name):
    return msg.HasField(name)


def _template(p, kind, h, w):
    if _set(p, "resize_width") and _set(p, "resize_height"):
        w, h = p.resize_width, p.resize_height
    elif kind != "ImageGtData" and _set(p, "short_size") and _set(p, "long_size"):
        w, h = p.short_size, p.long_size
    if kind == "ImageGtData":
        if _set(p, "crop_width") and _set(p, "crop_height"):
            w = p.crop_width or w
            h = p.crop_height or h
    elif kind == "DetectionData":
        if _set(p, "crop_width") and _set(p, "crop_height"):
            w, h = p.crop_width, p.crop_height
        elif _set(p, "crop_short_size") and _set(p, "crop_long_size"):
            w, h = p.crop_short_size, p.crop_long_size
    return int(h), int(w)


def top_shapes(lp, default_shape, batch_size=None):
    """The top shapes of one MSCNN / Cascade R-CNN data layer (see the module doc)."""
    c, h, w = default_shape
    field = {"ImageGtData": "image_gt_data_param", "DetectionData": "detection_data_param",
             "EvalData": "eval_data_param"}[lp.type]
    p = getattr(lp, field)
    n = int(batch_size) if batch_size is not None else int(p.batch_size or 1)
    h, w = _template(p, lp.type, h, w)
    shapes = [(n, c, h, w)]
    if lp.type == "EvalData":
        shapes.append((GT_ROWS, 8, 1, 1))
        shapes.append((n, 2, 1, 1))
        return shapes[:len(lp.top)]
    rates = list(p.downsample_rate) if lp.type == "ImageGtData" else list(p.stride)
    for r in rates:
        r = float(r or 1)
        shapes.append((n, 2 + p.coord_num, int(round(h / r)), int(round(w / r))))
    if p.output_gt_boxes:
        shapes.append((GT_ROWS, 7 if lp.type == "ImageGtData" else 8, 1, 1))
    return shapes
