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
"""

TYPES = frozenset(["PicPac"])


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


def top_shapes(lp, default_shape, batch_size=None):
    """The tops of one of :data:`TYPES` (see the module doc)."""
    return {"PicPac": picpac_shapes}[lp.type](lp, default_shape, batch_size)
