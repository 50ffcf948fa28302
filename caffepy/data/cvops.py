"""OpenCV's image operations that forks' C++ data layers call, in numpy (images H x W x C float).

* :func:`resize_cubic`: ``cv::resize(..., INTER_CUBIC)`` for float images: source coordinate
  (d + 0.5) * in / out - 0.5, Keys' cubic kernel with a = -0.75, edge pixels replicated.
* :func:`bgr_to_hsv` / :func:`hsv_to_bgr`: ``COLOR_BGR2HSV`` / ``COLOR_HSV2BGR`` on float images
  (H in degrees [0, 360), S and V in [0, 1]; FLT_EPSILON guards as OpenCV).
* :func:`rotated_bounds`: ``RotatedRect(centre, size, angle).boundingRect()`` (floor of the
  corners' minimum, ceil of their maximum, + 1).
* :func:`warp_affine_transparent`: ``cv::warpAffine(src, dst, M, size, INTER_LINEAR,
  BORDER_TRANSPARENT)``: dst(x, y) = bilinear src(M^-1 (x, y)); a destination pixel whose 2 x 2
  source cell starts outside the source keeps ``dst``'s value; a neighbour past the last row or
  column repeats it. Source coordinates are rounded to 1/32 pixel as OpenCV's
  INTER_TAB_SIZE (OpenCV rounds in 10-bit fixed point, so a coordinate within about 1e-3 of a
  1/64 step may round the other way).
"""
import math

import numpy as np

FLT_EPSILON = float(np.finfo(np.float32).eps)


def _cubic_weights(t, a=-0.75):
    t = np.asarray(t, np.float64)
    x = np.stack([1 + t, t, 1 - t, 2 - t], -1)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, far)


def _cubic_axis(img, axis, out_len):
    n = img.shape[axis]
    pos = (np.arange(out_len) + 0.5) * (n / out_len) - 0.5
    start = np.floor(pos).astype(np.int64)
    w = _cubic_weights(pos - start)
    idx = np.clip(start[:, None] + np.arange(-1, 3)[None, :], 0, n - 1)
    taken = np.take(img, idx, axis=axis)               # axis grows to (out_len, 4)
    shape = [1] * taken.ndim
    shape[axis], shape[axis + 1] = out_len, 4
    return (taken * w.reshape(shape)).sum(axis=axis + 1)


def resize_cubic(img, width, height):
    """``cv::resize(img, (width, height), INTER_CUBIC)`` of an H x W x C float image."""
    out = _cubic_axis(np.asarray(img, np.float64), 1, int(width))
    return _cubic_axis(out, 0, int(height))


def bgr_to_hsv(img):
    b, g, r = img[..., 0], img[..., 1], img[..., 2]
    v = img.max(axis=-1)
    diff = v - img.min(axis=-1)
    s = diff / (np.abs(v) + FLT_EPSILON)
    k = 60.0 / (diff + FLT_EPSILON)
    h = np.where(v == r, (g - b) * k, np.where(v == g, (b - r) * k + 120, (r - g) * k + 240))
    h = np.where(h < 0, h + 360, h)
    return np.stack([h, s, v], -1)


_SECTORS = np.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])


def hsv_to_bgr(img):
    h, s, v = img[..., 0] * (6.0 / 360.0), img[..., 1], img[..., 2]
    h = np.mod(h, 6.0)
    sector = np.floor(h).astype(np.int64)
    bad = (sector < 0) | (sector >= 6)
    sector = np.where(bad, 0, sector)
    f = np.where(bad, 0.0, h - np.floor(h))
    tab = np.stack([v, v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))], -1)
    rgb = np.take_along_axis(tab, _SECTORS[sector], axis=-1)   # (b, g, r) picks
    out = np.stack([rgb[..., 0], rgb[..., 1], rgb[..., 2]], -1)
    grey = (s == 0)[..., None]
    return np.where(grey, v[..., None], out)


def _corners(cx, cy, w, h, angle):
    """RotatedRect::points: the 4 corners of a w x h box at (cx, cy) turned by ``angle`` degrees."""
    rad = angle * math.pi / 180.0
    b, a = math.cos(rad) * 0.5, math.sin(rad) * 0.5
    p0 = (cx - a * h - b * w, cy + b * h - a * w)
    p1 = (cx + a * h - b * w, cy - b * h - a * w)
    return np.array([p0, p1, (2 * cx - p0[0], 2 * cy - p0[1]), (2 * cx - p1[0], 2 * cy - p1[1])],
                    np.float32)


def rotated_bounds(cx, cy, w, h, angle):
    """``RotatedRect((cx, cy), (w, h), angle).boundingRect()`` as (x, y, width, height)."""
    pts = _corners(cx, cy, w, h, angle)
    x0, y0 = int(math.floor(pts[:, 0].min())), int(math.floor(pts[:, 1].min()))
    x1, y1 = int(math.ceil(pts[:, 0].max())), int(math.ceil(pts[:, 1].max()))
    return x0, y0, x1 - x0 + 1, y1 - y0 + 1


def affine_from_points(src, dst):
    """``cv::getAffineTransform``: the 2 x 3 matrix taking the first 3 ``src`` points to ``dst``."""
    a = np.concatenate([np.asarray(src[:3], np.float64), np.ones((3, 1))], 1)
    return np.linalg.solve(a, np.asarray(dst[:3], np.float64)).T


def warp_affine_transparent(src, matrix, width, height, dst=None):
    """``cv::warpAffine(src, dst, matrix, (width, height), INTER_LINEAR, BORDER_TRANSPARENT)``."""
    src = np.asarray(src, np.float64)
    H, W = src.shape[:2]
    out = np.zeros((height, width) + src.shape[2:]) if dst is None else dst.astype(np.float64)
    inv = np.linalg.inv(np.vstack([matrix, [0.0, 0.0, 1.0]]))[:2]
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    sx = inv[0, 0] * xx + inv[0, 1] * yy + inv[0, 2]
    sy = inv[1, 0] * xx + inv[1, 1] * yy + inv[1, 2]
    qx, qy = np.floor(sx * 32 + 0.5).astype(np.int64), np.floor(sy * 32 + 0.5).astype(np.int64)
    x0, y0 = qx >> 5, qy >> 5
    fx, fy = (qx & 31) / 32.0, (qy & 31) / 32.0
    keep = (x0 >= 0) & (x0 < W) & (y0 >= 0) & (y0 < H)

    xs = [np.clip(x0, 0, W - 1), np.clip(x0 + 1, 0, W - 1)]
    ys = [np.clip(y0, 0, H - 1), np.clip(y0 + 1, 0, H - 1)]
    wx = [1 - fx, fx]
    wy = [1 - fy, fy]
    val = sum(src[ys[j], xs[i]] * (wy[j] * wx[i])[..., None] if src.ndim == 3
              else src[ys[j], xs[i]] * wy[j] * wx[i] for j in range(2) for i in range(2))
    out[keep] = val[keep]
    return out
