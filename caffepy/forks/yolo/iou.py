"""The IoU family of eric612/MobileNet-YOLO's Yolov3 loss (``yolov3_param.iou_loss``): the
values its ``box_iou(a, b, type)`` gives and the box gradient its ``dx_box_iou`` gives.

Boxes are (x, y, w, h) centre / size, broadcasting over leading axes. Kinds follow the fork's
enum: IOU 0, GIOU 1, MSE 2, DIOU 3, CIOU 4. With C the smallest box holding both, c2 its squared
diagonal, d2 the squared centre distance, v = 4 / pi^2 (atan(w_t / h_t) - atan(w / h))^2:
  IOU, MSE: IoU;   GIOU: IoU - (area(C) - union) / area(C);
  DIOU: IoU - (d2 / c2)^0.6 (the fork's exponent);
  CIOU: IoU - d2 / c2 - alpha v, alpha = v / (1 - IoU + v + 1e-6);
(the plain IoU when C is empty).
"""
import math

import numpy as np

IOU, GIOU, MSE, DIOU, CIOU = range(5)


def _edges(a):
    return (a[..., 1] - a[..., 3] / 2, a[..., 1] + a[..., 3] / 2,
            a[..., 0] - a[..., 2] / 2, a[..., 0] + a[..., 2] / 2)


def variant_iou(a, b, kind):
    """The fork's ``box_iou(a, b, kind)`` (see module doc)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    at, ab, al, ar = _edges(a)
    bt, bb, bl, br = _edges(b)
    iw, ih = np.minimum(ar, br) - np.maximum(al, bl), np.minimum(ab, bb) - np.maximum(at, bt)
    inter = np.where((iw < 0) | (ih < 0), 0.0, iw * ih)
    union = a[..., 2] * a[..., 3] + b[..., 2] * b[..., 3] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / union
        if kind in (IOU, MSE):
            return iou
        cw = np.maximum(ar, br) - np.minimum(al, bl)
        ch = np.maximum(ab, bb) - np.minimum(at, bt)
        if kind == GIOU:
            c = cw * ch
            return np.where(c == 0, iou, iou - (c - union) / c)
        c = cw * cw + ch * ch
        d = (a[..., 0] - b[..., 0]) ** 2 + (a[..., 1] - b[..., 1]) ** 2
        if kind == DIOU:
            return np.where(c == 0, iou, iou - (d / c) ** 0.6)
        v = 4 / math.pi ** 2 * (np.arctan(b[..., 2] / b[..., 3])
                                - np.arctan(a[..., 2] / a[..., 3])) ** 2
        alpha = v / (1 - iou + v + 0.000001)
        return np.where(c == 0, iou, iou - d / c - alpha * v)


def iou_gradient(pred, truth, kind):
    """The fork's ``dx_box_iou(pred, truth, kind)``: (dx, dy, dw, dh) of its IoU family.

    The IoU part is d(I / U) over the edges t, b, l, r (intersection terms only where the
    prediction's edge is inside the truth's); GIOU adds d(U / C) (alone when the boxes do not
    meet); DIOU and CIOU add d(-d2 / c2)-like terms with the hull's edge derivatives, and CIOU
    alpha 8 / pi^2 (atan(w_t / h_t) - atan(w / h)) (h, -w) on (dw, dh). Then dx = dl + dr,
    dy = dt + db, dw = dr - dl, dh = db - dt (not halved), as darknet's.
    """
    x, y, w, h = (float(v) for v in pred)
    tx, ty, tw, th = (float(v) for v in truth)
    pt0, pb0, pl0, pr0 = y - h / 2, y + h / 2, x - w / 2, x + w / 2
    pt, pb, pl, pr = min(pt0, pb0), max(pt0, pb0), min(pl0, pr0), max(pl0, pr0)
    tt, tb, tl, tr = ty - th / 2, ty + th / 2, tx - tw / 2, tx + tw / 2
    X = (pb - pt) * (pr - pl)
    Xhat = (tb - tt) * (tr - tl)
    Ih, Iw = min(pb, tb) - max(pt, tt), min(pr, tr) - max(pl, tl)
    I = Iw * Ih
    U = X + Xhat - I
    S = (x - tx) ** 2 + (y - ty) ** 2
    gcw, gch = max(pr, tr) - min(pl, tl), max(pb, tb) - min(pt, tt)
    gc = gcw * gch
    dX = {"t": -(pr - pl), "b": pr - pl, "l": -(pb - pt), "r": pb - pt}
    dI = {"t": -Iw if pt > tt else 0.0, "b": Iw if pb < tb else 0.0,
          "l": -Ih if pl > tl else 0.0, "r": Ih if pr < tr else 0.0}
    dU = {k: dX[k] - dI[k] for k in dX}
    dC = {"t": -gcw if pt < tt else 0.0, "b": gcw if pb > tb else 0.0,
          "l": -gch if pl < tl else 0.0, "r": gch if pr > tr else 0.0}
    p = {k: (U * dI[k] - I * dU[k]) / (U * U) if U > 0 else 0.0 for k in dX}
    if not pt0 < pb0:
        p["t"] = p["b"]
    if not pl0 < pr0:
        p["l"] = p["r"]
    if kind == GIOU:
        g = {k: (gc * dU[k] - U * dC[k]) / (gc * gc) if gc else 0.0 for k in dX}
        if Iw <= 0 or Ih <= 0:
            p = g
        elif gc > 0:
            p = {k: p[k] + g[k] for k in dX}
    ct, cb = min(y - h / 2, ty - th / 2), max(y + h / 2, ty + th / 2)
    cl, cr = min(x - w / 2, tx - tw / 2), max(x + w / 2, tx + tw / 2)
    cw, ch = cr - cl, cb - ct
    C = cw * cw + ch * ch
    dCw = {"x": (pr > tr) - (pl < tl), "y": 0.0,
           "w": (0.5 if pr > tr else 0.0) + (0.5 if pl < tl else 0.0), "h": 0.0}
    dCh = {"x": 0.0, "y": (pb > tb) - (pt < tt), "w": 0.0,
           "h": (0.5 if pb > tb else 0.0) + (0.5 if pt < tt else 0.0)}
    out = [p["l"] + p["r"], p["t"] + p["b"], p["r"] - p["l"], p["b"] - p["t"]]
    if kind in (DIOU, CIOU):
        ar = 0.0
        if kind == CIOU:
            gap = math.atan(tw / th) - math.atan(w / h)
            v = 4 / math.pi ** 2 * gap * gap
            ar = v / (1 - (I / U if U else float("nan")) + v + 0.000001)
            ar_dw, ar_dh = 8 / math.pi ** 2 * gap * h, -8 / math.pi ** 2 * gap * w
        if C == 0 and (Iw <= 0 or Ih <= 0):
            return [float("nan")] * 4              # the fork's 0 / 0 (then zeroed as NaN)
        if C > 0 or Iw <= 0 or Ih <= 0:
            extra = [(2 * (tx - x) * C - 2 * (cw * dCw["x"] + ch * dCh["x"]) * S) / (C * C),
                     (2 * (ty - y) * C - 2 * (cw * dCw["y"] + ch * dCh["y"]) * S) / (C * C),
                     2 * (cw * dCw["w"] + ch * dCh["w"]) * S / (C * C),
                     2 * (cw * dCw["h"] + ch * dCh["h"]) * S / (C * C)]
            if kind == CIOU:
                extra[2] += ar * ar_dw
                extra[3] += ar * ar_dh
            out = extra if (Iw <= 0 or Ih <= 0) else [o + e for o, e in zip(out, extra)]
    return out
