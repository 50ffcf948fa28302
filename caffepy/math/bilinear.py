"""The bilinear read of a feature map that ROI and deformable layers of several forks share.

At (y, x) with 0 <= y, 0 <= x, on a map of H rows and W columns: the low corner is
(floor(y), floor(x)); a coordinate on or past the last row (column) is taken as that row with no
high neighbour (y = H - 1, and both corners on it); then, with ly = y - hl and lx = x - wl,

    v = (1 - ly)(1 - lx) m[hl, wl] + (1 - ly) lx m[hl, wh] + ly (1 - lx) m[hh, wl] + ly lx m[hh, wh]

summed in that order (so each fork's float arithmetic is kept). Callers handle what lies outside
the map (skip it, give 0, clamp to 0 first), which is where the forks differ.
"""
import math


def corners(y, x, H, W):
    """(hl, hh, wl, wh, y, x): the two rows and columns read and the coordinates after the
    last-row / last-column rule (see module doc)."""
    hl, wl = int(math.floor(y)), int(math.floor(x))
    if hl >= H - 1:
        hl = hh = H - 1
        y = float(hl)
    else:
        hh = hl + 1
    if wl >= W - 1:
        wl = wh = W - 1
        x = float(wl)
    else:
        wh = wl + 1
    return hl, hh, wl, wh, y, x


def sample(img, y, x):
    """img (C, H, W) read at (y, x) inside the map: the C values (module doc)."""
    _, H, W = img.shape
    return read(img, corners(y, x, H, W))


def read(img, at):
    """img (C, H, W) read at ``at``, what :func:`corners` returned for its map."""
    hl, hh, wl, wh, y, x = at
    ly, lx = y - hl, x - wl
    return ((1 - ly) * (1 - lx) * img[:, hl, wl] + (1 - ly) * lx * img[:, hl, wh]
            + ly * (1 - lx) * img[:, hh, wl] + ly * lx * img[:, hh, wh])
