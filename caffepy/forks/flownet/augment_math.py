"""The math of FlowNet 2's augmentation (lmb-freiburg/flownet2 augmentation_layer_base, its rng
and CUDA kernels), used by :mod:`caffepy.forks.flownet.augment`: coefficient arrays, the spatial
transform, random draws and the per-item colour and effect steps (see that module's doc)."""
import math

import numpy as np

from ...proto import caffe_pb2

COEFF_FIELDS = [(f.name, float(f.default_value))
                for f in caffe_pb2.AugmentationCoeff.DESCRIPTOR.fields]
NUM_PARAMS = len(COEFF_FIELDS)
_SPATIAL = ("mirror", "translate", "rotate", "zoom", "squeeze", "translate_x", "translate_y")
_CHROMATIC = ("brightness", "gamma", "contrast", "color")
_EFFECT = ("fog_size", "fog_amount", "motion_blur_angle", "motion_blur_size", "shadow_angle",
           "shadow_distance", "shadow_strength", "noise")
_EIGEN = ("lmult_pow", "lmult_mult", "lmult_add", "sat_pow", "sat_mult", "sat_add", "col_pow",
          "col_mult", "col_add", "ladd_pow", "ladd_mult", "ladd_add", "col_rotate")
# generator field -> the coefficients it sets (the fork's generate_*_coeffs)
_EIGEN_MAP = (("ladd_pow", ("pow_nomean0",)), ("col_pow", ("pow_nomean1", "pow_nomean2")),
              ("ladd_add", ("add_nomean0",)), ("col_add", ("add_nomean1", "add_nomean2")),
              ("ladd_mult", ("mult_nomean0",)), ("col_mult", ("mult_nomean1", "mult_nomean2")),
              ("sat_pow", ("pow_withmean1+2",)), ("sat_add", ("add_withmean1+2",)),
              ("sat_mult", ("mult_withmean1+2",)), ("lmult_pow", ("lmult_pow",)),
              ("lmult_mult", ("lmult_mult",)), ("lmult_add", ("lmult_add",)),
              ("col_rotate", ("col_angle",)))


def coeffs_to_array(c):
    """Coefficient dict -> the fork's array (log of the fields whose default is not 0)."""
    return np.array([c.get(n, d) if abs(d) < 1e-3 else math.log(c.get(n, d))
                     for n, d in COEFF_FIELDS])


def array_to_coeffs(a):
    return {n: float(v) if abs(d) < 1e-3 else math.exp(float(v))
            for (n, d), v in zip(COEFF_FIELDS, a)}


def transform_matrix(c, cw, ch, bw, bh):
    """3 x 3 affine map from output (x, y, 1) to input position (tTransMat::fromCoeff)."""
    def mat(u0, u1, u2, u3, u4, u5):
        return np.array([[u0, u2, u4], [u1, u3, u5], [0.0, 0.0, 1.0]])
    m = (mat(-1, 0, 0, 1, .5 * cw, -.5 * ch) if c.get("mirror", 0) else
         mat(1, 0, 0, 1, -.5 * cw, -.5 * ch))
    a = c.get("angle", 0.0)
    m = mat(math.cos(a), math.sin(a), -math.sin(a), math.cos(a), 0, 0) @ m
    m = mat(1, 0, 0, 1, c.get("dx", 0.0) * cw, c.get("dy", 0.0) * ch) @ m
    m = mat(1.0 / c.get("zoom_x", 1.0), 0, 0, 1.0 / c.get("zoom_y", 1.0), 0, 0) @ m
    return mat(1, 0, 0, 1, .5 * bw, .5 * bh) @ m


def rng_generate(p, discount, rng, prob0=float("nan")):
    """One value from a RandomGeneratorParameter (the fork's caffe_rng_generate)."""
    spread = p.spread * discount if p.apply_schedule else p.spread
    kind = p.rand_type
    if kind in ("uniform", "gaussian"):
        v = (p.mean if spread <= 0 else rng.uniform(p.mean - spread, p.mean + spread)
             if kind == "uniform" else rng.normal(p.mean, spread))
    elif kind == "bernoulli":
        return float(p.prob > 0 and rng.random() < p.prob)
    elif kind in ("uniform_bernoulli", "gaussian_bernoulli"):
        if not (p.prob > 0 and rng.random() < p.prob):
            if not math.isnan(prob0):
                return prob0
            v = 0.0
        elif spread <= 0:
            v = p.mean
        else:
            v = (rng.uniform(p.mean - spread, p.mean + spread) if kind == "uniform_bernoulli"
                 else rng.normal(p.mean, spread))
    else:
        raise ValueError("unknown rand_type '%s'" % kind)
    v = math.exp(v) if p.exp else v
    if p.discretize:
        v = round(v)
    return float(v) * p.multiplier


def generate(aug, c, discount, rng, sizes, kinds):
    """Draw the coefficients of ``kinds`` (of spatial, chromatic, eigen, effect) into ``c``."""
    g = lambda name, prob0=float("nan"): rng_generate(getattr(aug, name), discount, rng, prob0)
    if "spatial" in kinds:
        bw, bh, cw, ch = sizes
        base = dict(c)
        for _ in range(50):           # generate_valid_spatial_coeffs: all 4 corners inside
            s = {}
            if aug.HasField("mirror"):
                s["mirror"] = float(bool(g("mirror", 0.0)))
            if aug.HasField("translate"):
                s["dx"], s["dy"] = g("translate", 0.0), g("translate", 0.0)
            if aug.HasField("translate_x"):
                s["dx"] = g("translate_x", 0.0)
            if aug.HasField("translate_y"):
                s["dy"] = g("translate_y", 0.0)
            if aug.HasField("rotate"):
                s["angle"] = g("rotate", 0.0)
            if aug.HasField("zoom"):
                s["zoom_x"] = s["zoom_y"] = g("zoom", 1.0)
            if aug.HasField("squeeze"):
                q = g("squeeze", 1.0)
                s["zoom_x"], s["zoom_y"] = s.get("zoom_x", 1.0) * q, s.get("zoom_y", 1.0) / q
            trial = array_to_coeffs(coeffs_to_array(base) + coeffs_to_array(s))
            m = transform_matrix(trial, cw, ch, bw, bh)
            corners = m @ np.array([[0, cw - 1, 0, cw - 1], [0, 0, ch - 1, ch - 1], [1] * 4])
            fx, fy = np.floor(corners[0]), np.floor(corners[1])
            if np.all((fx >= 0) & (fx <= bw - 2) & (fy >= 0) & (fy <= bh - 2)):
                c.clear()
                c.update(trial)
                break
    if "chromatic" in kinds:
        for name in ("gamma", "brightness", "contrast"):
            if aug.HasField(name):
                c[name] = g(name)
        if aug.HasField("color"):
            c["color1"], c["color2"], c["color3"] = g("color"), g("color"), g("color")
    if "eigen" in kinds:
        for field, targets in _EIGEN_MAP:
            if aug.HasField(field):
                v = g(field)
                for t in targets:
                    if t.endswith("1+2"):
                        c[t[:-3] + "1"] = c[t[:-3] + "2"] = v
                    else:
                        c[t] = v
    if "effect" in kinds:
        for group in (("fog_amount", "fog_size"), ("motion_blur_angle", "motion_blur_size"),
                      ("shadow_angle", "shadow_distance", "shadow_strength")):
            if any(aug.HasField(n) for n in group):
                for n in group:
                    c[n] = g(n, 0.0)
        if aug.HasField("noise"):
            c["noise"] = g("noise")
    return c


def discount(schedule, num_iter):
    """The fork's coefficient schedule: initial -> final along
    2 / (1 + e^(-1.0986 t / half_life)) - 1."""
    return schedule.initial_coeff + (schedule.final_coeff - schedule.initial_coeff) * (
        2.0 / (1.0 + math.exp(-1.0986 * num_iter / schedule.half_life)) - 1.0)


def kinds_to_generate(aug, phase):
    if phase != caffe_pb2.TRAIN and not aug.augment_during_test:
        return set()
    kinds = set()
    for kind, names in (("spatial", _SPATIAL), ("chromatic", _CHROMATIC), ("eigen", _EIGEN),
                        ("effect", _EFFECT)):
        if any(aug.HasField(n) for n in names):
            kinds.add(kind)
    return kinds


def spatial_sample(img, m, ch, cw):
    """Bilinear read of img (C, H, W) at M (x, y, 1) for the ch x cw output grid, clamped."""
    H, W = img.shape[1:]
    y, x = np.mgrid[0:ch, 0:cw].astype(np.float64)
    xp = np.clip(x * m[0, 0] + y * m[0, 1] + m[0, 2], 0.0, W - 1.05).astype(np.float32)
    yp = np.clip(x * m[1, 0] + y * m[1, 1] + m[1, 2], 0.0, H - 1.05).astype(np.float32)
    x0, y0 = np.floor(xp).astype(np.int64), np.floor(yp).astype(np.int64)
    a, b = xp - x0, yp - y0
    return ((1 - a) * (1 - b) * img[:, y0, x0] + a * b * img[:, y0 + 1, x0 + 1]
            + (1 - a) * b * img[:, y0 + 1, x0] + a * (1 - b) * img[:, y0, x0 + 1])


def chromatic(rgb, c, max_multiplier):
    """ColorContrastAugmentation on one item (3, H, W)."""
    col = np.array([c["color1"], c["color2"], c["color3"]]).reshape(3, 1, 1)
    scaled = rgb * col
    rgb = np.clip(scaled * (rgb.sum(0) / (scaled.sum(0) + 0.01)), 0.0, 1.0) ** c["gamma"]
    rgb = 0.5 + (rgb + c["brightness"] - 0.5) * c["contrast"]
    return np.clip(rgb, 0.0, max_multiplier)


def eigen_space(bottom, eigvec):
    """ComputeChromaticEigenspace over the whole batch (N, 3, H, W)."""
    v = np.asarray(eigvec, dtype=np.float64).reshape(3, 3)
    eig = np.einsum("ck,nkhw->nchw", v, bottom)
    mean_rgb = bottom.mean(axis=(2, 3)).sum(0) / bottom.shape[0]
    max_abs = np.maximum(np.abs(eig).max(axis=(0, 2, 3)), 0.0)
    mean_eig = v @ mean_rgb
    mean_eig = np.where(max_abs > 1e-2, mean_eig / np.where(max_abs > 1e-2, max_abs, 1), mean_eig)
    return v, mean_rgb, max_abs, mean_eig, math.sqrt(float((max_abs ** 2).sum()))


def chromatic_eigen(rgb, c, space, max_multiplier):
    """ChromaticEigenAugmentation on one item (3, H, W)."""
    v, mean_rgb, max_abs, mean_eig, max_l = space
    eig = list(np.einsum("ck,khw->chw", v, rgb - mean_rgb.reshape(3, 1, 1)))
    for k in range(3):
        if max_abs[k] > 1e-2:
            e = eig[k] / max_abs[k]
            e = np.copysign(np.abs(e) ** c["pow_nomean%d" % k], e)
            eig[k] = (e + c["add_nomean%d" % k]) * c["mult_nomean%d" % k]
    eig = [eig[k] + mean_eig[k] for k in range(3)]
    if max_abs[0] > 1e-2:
        e = np.copysign(np.abs(eig[0]) ** c["pow_withmean0"], eig[0])
        eig[0] = (e + c["add_withmean0"]) * c["mult_withmean0"]
    s = np.sqrt(eig[1] ** 2 + eig[2] ** 2)
    big = s > 1e-2
    s1 = np.where(big, np.maximum(np.abs(s) ** c["pow_withmean1"] + c["add_withmean1"], 0.0)
                  * c["mult_withmean1"], s)
    a = c["col_angle"]
    if a != 0:
        eig[1], eig[2] = (math.cos(a) * eig[1] - math.sin(a) * eig[2],
                          math.sin(a) * eig[1] + math.cos(a) * eig[2])
    eig = [eig[k] * max_abs[k] if max_abs[k] > 1e-2 else eig[k] for k in range(3)]
    if max_l > 1e-2:
        l1 = np.sqrt(sum(e ** 2 for e in eig)) / max_l
    safe = np.where(big, s, 1.0)
    eig[1] = np.where(big, eig[1] / safe * s1, eig[1])
    eig[2] = np.where(big, eig[2] / safe * s1, eig[2])
    if max_l > 1e-2:
        ln = np.sqrt(sum(e ** 2 for e in eig))
        l1 = np.maximum(l1 ** c["lmult_pow"] + c["lmult_add"], 0.0) * c["lmult_mult"] * max_l
        ok = ln > 1e-2
        for k in range(3):
            e = np.where(ok, eig[k] / np.where(ok, ln, 1.0) * l1, eig[k])
            eig[k] = np.where(ok & (e > max_abs[k]), max_abs[k], e)
    out = np.einsum("kc,khw->chw", v, np.stack(eig))
    return np.clip(out, 0.0, max_multiplier)


def effects(img, c, max_multiplier, rng):
    """ApplyEffects (the shadow half-plane; clipping) and the Gaussian noise, on one item."""
    C, H, W = img.shape
    y, x = np.mgrid[0:H, 0:W]
    shade = ((x - W // 2) * math.cos(c["shadow_angle"]) + (y - H // 2) * math.sin(c["shadow_angle"])
             - c["shadow_distance"]) > 0
    img = np.clip(img - shade * c["shadow_strength"], 0.0, max_multiplier)
    if c["noise"] > 0:
        img = img + rng.normal(0.0, c["noise"], img.shape)
    return img


def steps_needed(c):
    chrom = any(c[n] != d for n, d in (("gamma", 1), ("brightness", 0), ("contrast", 1),
                                       ("color1", 1), ("color2", 1), ("color3", 1)))
    eig = any(abs(c[n] - d) > 0 for n, d in COEFF_FIELDS[12:34])
    eff = ((c["fog_amount"] != 0 and c["fog_size"] != 0) or c["motion_blur_size"] > 0
           or c["shadow_strength"] > 0 or c["noise"] > 0)
    return chrom, eig, eff
