"""Top shapes of fork data readers caffepy does not build, for ``caffepy.zoo``'s data-layer
substitution (their data formats are not read; each function gives what the fork's setup gives).

- ``PicPac`` (aaalgo/caffe, src/caffe/layers/picpac_layer.cpp; ``picpac_param``): the tops are
  the shapes of aaalgo/picpac's ``BatchImageStream::next_shape`` (picpac-cv.h; the layer sets
  ``channel_first``): images batch x C x H x W, C = ``channels`` when > 0 (the stream converts
  every image to it), H x W = ``crop_height`` x ``crop_width`` when both are set (the crop of
  picpac-cv.cpp), else ``resize_height`` x ``resize_width`` when both are set, else the image's
  own size (the caller's default; ``min_size`` / ``max_size`` keep the aspect ratio and depend
  on the image). Labels: without ``annotate`` batch (a number per image) or batch x ``onehot``;
  with ``annotate`` a label image batch x ``onehot`` x H x W, or batch x 1 x H x W when
  ``onehot`` is 0 (one-channel annotations, the usual case: the channels are the stored
  annotation's). ``batch`` defaults to 1 (BatchImageStream::Config).
- ``DocData`` (ctensmeyer/caffe, src/caffe/layers/doc_data_layer.cpp; ``doc_data_param``,
  ``image_transform_param``): the first top batch_size x C x H x W, the stored DocumentDatum's
  image (the caller's default) passed through the transform sequence's output shapes
  (src/caffe/transformer/): each ``params`` entry draws one of its transforms; an entry whose
  only shape-changing choice is one fixed resize (``width`` / ``height`` or ``size``, one value
  each) or crop gives that size -- the fork's resize reports width before height (its
  InferOutputShape), the crop height before width; an entry drawing among different sizes, or
  sizing by percentages, leaves the default. Then one top per ``label_names``: batch_size.
"""

TYPES = frozenset(["PicPac", "DocData"])


def picpac_shapes(lp, default_shape, batch_size=None):
    p = lp.picpac_param
    n = int(batch_size) if batch_size is not None else int(p.batch or 1)
    c, h, w = default_shape
    if p.channels > 0:
        c = p.channels
    if p.crop_width > 0 and p.crop_height > 0:
        h, w = p.crop_height, p.crop_width
    elif p.resize_width > 0 and p.resize_height > 0:
        h, w = p.resize_height, p.resize_width
    if p.annotate:
        label = (n, int(p.onehot) or 1, int(h), int(w))
    else:
        label = (n, int(p.onehot)) if p.onehot else (n,)
    return [(n, int(c), int(h), int(w)), label][:len(lp.top)]


def _fixed(sizes):
    """(first, second) of a resize / crop parameter with one fixed value each, else None."""
    if len(sizes.width) == 1 and len(sizes.height) == 1:
        return int(sizes.width[0]), int(sizes.height[0])
    if not len(sizes.width) and len(sizes.size) == 1:
        return int(sizes.size[0]), int(sizes.size[0])
    return None


def _doc_entry(entry, h, w):
    """The (h, w) after one ProbImageTransformParameter (see the module doc)."""
    outs = set()
    for r in entry.resize_params:
        got = _fixed(r)
        outs.add(None if got is None else (got[0], got[1]))   # the fork: width, then height
    for c in entry.crop_params:
        got = _fixed(c)
        outs.add(None if got is None else (got[1], got[0]))
    others = len(entry.ListFields()) and any(
        f.name.endswith("_params") and f.name not in ("resize_params", "crop_params")
        for f, _ in entry.ListFields())
    if others and outs:
        outs.add((h, w))
    if len(outs) == 1 and None not in outs:
        return outs.pop()
    return h, w


def doc_data_shapes(lp, default_shape, batch_size=None):
    p = lp.doc_data_param
    n = int(batch_size) if batch_size is not None else int(p.batch_size or 1)
    c, h, w = default_shape
    if p.force_color:
        c = 3
    for entry in lp.image_transform_param.params:
        h, w = _doc_entry(entry, h, w)
    return ([(n, int(c), int(h), int(w))] + [(n,)] * len(p.label_names))[:len(lp.top)]


def top_shapes(lp, default_shape, batch_size=None):
    """The tops of one of :data:`TYPES` (see the module doc)."""
    return {"PicPac": picpac_shapes, "DocData": doc_data_shapes}[lp.type](
        lp, default_shape, batch_size)
