"""Top shapes of pulkitag/caffe's GenericWindowData and SquareBoxData for ``caffepy.zoo``'s
data-layer substitution (a net file read without its window files).

As the fork's DataLayerSetUp shapes them (caffepy/forks/misc/pulkitag_data.py):

- ``GenericWindowData``: data N x G C x crop x crop (C = 1 with ``is_gray``, else 3), label
  N x label_size x 1 x 1. G (images per example) and label_size are in the window file's header,
  not in the net: G is the fewest whole images that leave every top of a Slice of the data
  on the channel axis non-empty (the nets slice an example into its images: a pair of RGB frames
  cut at 3 is 6 channels, of gray frames cut at 1 is 2), 1 without such a Slice; label_size 1.
- ``SquareBoxData``: data N x 3 x crop x crop (the images are read in colour), label N x 1 x 1 x 1.

N is ``batch_size`` (the caller's when given); crop the layer's ``crop_size`` (the default size
when unset).
"""
TYPES = frozenset(["GenericWindowData", "SquareBoxData"])


def _min_channels(net_param, top, k):
    """The fewest channels, a multiple of ``k``, that leave each Slice of ``top`` on axis 1 with
    non-empty tops."""
    need = k
    for lp in net_param.layer:
        if lp.type != "Slice" or list(lp.bottom[:1]) != [top]:
            continue
        sp = lp.slice_param
        axis = sp.slice_dim if sp.HasField("slice_dim") else sp.axis
        if axis != 1:
            continue
        points = list(sp.slice_point)
        least = points[-1] + 1 if points else len(lp.top)
        c = k
        while c < least or (not points and c % len(lp.top)):
            c += k
        need = max(need, c)
    return need


def top_shapes(lp, net_param, default_shape, batch_size=None):
    """The top shapes of one of the fork's readers (see the module doc)."""
    field = {"GenericWindowData": "generic_window_data_param",
             "SquareBoxData": "square_box_data_param"}[lp.type]
    p = getattr(lp, field)
    n = int(batch_size) if batch_size is not None else int(p.batch_size or 1)
    crop = int(p.crop_size) or int(default_shape[1])
    if lp.type == "SquareBoxData":
        c, labels = 3, 1
    else:
        c = 1 if p.is_gray else 3
        c = _min_channels(net_param, lp.top[0], c) if len(lp.top) else c
        labels = 1
    return [(n, c, crop, crop), (n, labels, 1, 1)][:len(lp.top)]
