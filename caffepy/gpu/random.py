"""A counter-based device random generator: Philox4x32-10 (Salmon et al., SC'11; Random123).

Element i of a draw is a pure function of (key, counter): ``philox(key=(seed_lo, seed_hi),
counter=(i, offset_lo, offset_hi, 0))``, lane 0. No generator state lives on the device, any
element can be recomputed (Dropout's backward recomputes its mask instead of storing it), and
:func:`philox4x32` below is the numpy reference the device kernels are tested against. Seeds come
from ``caffepy.common.rng()``, so ``set_random_seed`` makes GPU runs reproducible too.

uniform: u = (bits + 0.5) * 2^-32 in (0, 1); gaussian: Box-Muller on lanes 0 and 1.
"""
import numpy as np

from .kernels import register_source

PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85

# Device functions: shared by the kernels here and by the families that draw (Dropout, pooling).
PHILOX_DEVICE = r"""
__device__ __forceinline__ void philox4x32_10(unsigned int c[4], unsigned int k0, unsigned int k1) {
  for (int r = 0; r < 10; ++r) {
    if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const unsigned int hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
    const unsigned int hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
    const unsigned int n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0; c[1] = lo1; c[2] = n2; c[3] = lo0;
  }
}
__device__ __forceinline__ Dtype philox_uniform(const int i, const unsigned int k0,
    const unsigned int k1, const unsigned int off_lo, const unsigned int off_hi) {
  unsigned int c[4] = {(unsigned int)i, off_lo, off_hi, 0u};
  philox4x32_10(c, k0, k1);
  return ((Dtype)c[0] + (Dtype)0.5) * (Dtype)2.3283064365386963e-10;
}
"""

SOURCE = register_source("random", PHILOX_DEVICE + r"""
__global__ void philox_bits(const int n, unsigned int* out, const unsigned int k0,
    const unsigned int k1, const unsigned int off_lo, const unsigned int off_hi) {
  CUDA_KERNEL_LOOP(i, n) {
    unsigned int c[4] = {(unsigned int)(i / 4), off_lo, off_hi, 0u};
    philox4x32_10(c, k0, k1);
    out[i] = c[i % 4];
  }
}
__global__ void uniform_fill(const int n, Dtype* y, const Dtype lo, const Dtype hi,
    const unsigned int k0, const unsigned int k1, const unsigned int off_lo,
    const unsigned int off_hi) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = lo + (hi - lo) * philox_uniform(i, k0, k1, off_lo, off_hi); }
}
__global__ void gaussian_fill(const int n, Dtype* y, const Dtype mean, const Dtype stddev,
    const unsigned int k0, const unsigned int k1, const unsigned int off_lo,
    const unsigned int off_hi) {
  CUDA_KERNEL_LOOP(i, n) {
    unsigned int c[4] = {(unsigned int)i, off_lo, off_hi, 0u};
    philox4x32_10(c, k0, k1);
    const Dtype u1 = ((Dtype)c[0] + (Dtype)0.5) * (Dtype)2.3283064365386963e-10;
    const Dtype u2 = ((Dtype)c[1] + (Dtype)0.5) * (Dtype)2.3283064365386963e-10;
    y[i] = mean + stddev * sqrt((Dtype)-2 * log(u1)) * cos((Dtype)6.283185307179586 * u2);
  }
}
""")


# -- numpy reference ---------------------------------------------------------------------------
def philox4x32(counters, key):
    """Philox4x32-10 of counters (N, 4) uint32 under key (2,) -> (N, 4) uint32."""
    c = np.array(counters, dtype=np.uint64).reshape(-1, 4)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    mask = np.uint64(0xFFFFFFFF)
    for r in range(10):
        if r:
            k0 = (k0 + np.uint64(PHILOX_W0)) & mask
            k1 = (k1 + np.uint64(PHILOX_W1)) & mask
        p0 = np.uint64(PHILOX_M0) * c[:, 0]
        p1 = np.uint64(PHILOX_M1) * c[:, 2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & mask
        hi1, lo1 = p1 >> np.uint64(32), p1 & mask
        c = np.stack([hi1 ^ c[:, 1] ^ k0, lo1, hi0 ^ c[:, 3] ^ k1, lo0], axis=1)
    return c.astype(np.uint32)


def split_seed(seed):
    """(k0, k1) of a 64-bit seed."""
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    return seed & 0xFFFFFFFF, seed >> 32


def reference_uniform(n, seed, offset=0, dtype=np.float64):
    """What ``philox_uniform`` gives for elements 0..n-1 (numpy, for tests)."""
    k0, k1 = split_seed(seed)
    off_lo, off_hi = split_seed(offset)
    ctr = np.zeros((n, 4), dtype=np.uint64)
    ctr[:, 0] = np.arange(n)
    ctr[:, 1], ctr[:, 2] = off_lo, off_hi
    bits = philox4x32(ctr, (k0, k1))[:, 0]
    dt = np.dtype(dtype).type
    return (bits.astype(dt) + dt(0.5)) * dt(2.3283064365386963e-10)


def draw_seed():
    """A fresh 64-bit key from caffepy's seeded generator."""
    from .. import common
    return int(common.rng().integers(0, 2 ** 63))


def seed_args(seed, offset=0):
    k0, k1 = split_seed(seed)
    o0, o1 = split_seed(offset)
    return k0, k1, o0, o1


def uniform(dev, y, lo=0.0, hi=1.0, seed=None):
    """Fill device array y with U(lo, hi)."""
    seed = draw_seed() if seed is None else seed
    dev.kernels("random", y.dtype).uniform_fill(y.size, y, lo, hi, *seed_args(seed))


def gaussian(dev, y, mean=0.0, std=1.0, seed=None):
    """Fill device array y with N(mean, std^2)."""
    seed = draw_seed() if seed is None else seed
    dev.kernels("random", y.dtype).gaussian_fill(y.size, y, mean, std, *seed_args(seed))
