"""``powf`` (the float power of the C library) as explicit vector code, for ``caffe_powx``.

Caffe's CPU layers raise a float blob to a power with ``std::pow`` per element (LRN's
``scale^-beta``, the Power layer): glibc's ``powf``, a scalar call of about 15 ns here. glibc 2.28
and later (and musl) compute it in double from two small tables:

* ``log2 x``: x = 2^k z with z in [0x3f330000, 2 * 0x3f330000) as bits, so z/c - 1 is small
  for c the centre of z's one of 16 sub-intervals; ``r = z * (1/c) - 1`` and
  ``log2 x = k + log2 c + r (A0 r^4 + ... + A4)`` (a degree-5 polynomial in r, evaluated as
  ``y = A0 r + A1``, ``p = A2 r + A3``, ``q = A4 r + (log2 c + k)``, ``q = p r^2 + q``,
  ``y r^4 + q``);
* ``2^t`` for t = y log2 x: t = i/32 + s, |s| <= 1/64, by adding and subtracting
  ``1.5 * 2^52 / 32`` (the low bits of the sum are i); ``2^(i/32)`` is a table entry whose
  exponent field gets i >> 5 added, and ``2^s ~ (C0 s + C1) s^2 + (C2 s + 1)``;
* the double result rounded once to float; ``t > 0x1.fffffffd1d571p+6`` gives +inf, ``t <= -150``
  gives +0.

Each ``a * b + c`` above is one fused multiply-add where glibc's build for the machine fuses it
(its FMA build, chosen on CPUs with FMA and AVX2) and two roundings where it does not: both
orders are kept (:data:`VARIANTS`). The kernels here run that arithmetic on 8 elements at once
(LLVM vector IR through numba intrinsics: the FMAs as ``llvm.fma``, no fast-math), so the results
are the C library's bit for bit: for ``b = -0.75`` every one of the 2^32 float inputs gives
glibc 2.36's ``powf`` value (measured). An 8-element block holding an input the polynomial path
does not cover (zero, subnormal, negative, infinite, NaN: the C library's special cases) is
computed by the C library, element by element; ``b`` zero, infinite or NaN goes to the C library
whole. :func:`caffepy.math._numba_libm.powx` picks a variant per exponent only after it gave the
C library's bytes on a fixed sample of inputs (so a C library with another algorithm keeps the
scalar calls), about 3x faster than the scalar calls here.
"""
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

LANES = 8
_ONE_AND_HALF_2_47 = float.fromhex("0x1.8p+52") / 32      # the rounding shift, 2^(i/32) steps
_OVERFLOW = float.fromhex("0x1.fffffffd1d571p+6")           # above: +inf
_UNDERFLOW = -150.0                                         # at or below: +0
#: 1/c and log2 c of the 16 sub-intervals (glibc's __powf_log2_data, POWF_SCALE 1).
_INVC = [float.fromhex(h) for h in (
    "0x1.661ec79f8f3bep+0", "0x1.571ed4aaf883dp+0", "0x1.49539f0f010bp+0", "0x1.3c995b0b80385p+0",
    "0x1.30d190c8864a5p+0", "0x1.25e227b0b8eap+0", "0x1.1bb4a4a1a343fp+0", "0x1.12358f08ae5bap+0",
    "0x1.0953f419900a7p+0", "0x1p+0", "0x1.e608cfd9a47acp-1", "0x1.ca4b31f026aap-1",
    "0x1.b2036576afce6p-1", "0x1.9c2d163a1aa2dp-1", "0x1.886e6037841edp-1",
    "0x1.767dcf5534862p-1")]
_LOGC = [float.fromhex(h) for h in (
    "-0x1.efec65b963019p-2", "-0x1.b0b6832d4fca4p-2", "-0x1.7418b0a1fb77bp-2",
    "-0x1.39de91a6dcf7bp-2", "-0x1.01d9bf3f2b631p-2", "-0x1.97c1d1b3b7afp-3",
    "-0x1.2f9e393af3c9fp-3", "-0x1.960cbbf788d5cp-4", "-0x1.a6f9db6475fcep-5", "0x0p+0",
    "0x1.338ca9f24f53dp-4", "0x1.476a9543891bap-3", "0x1.e840b4ac4e4d2p-3",
    "0x1.40645f0c6651cp-2", "0x1.88e9c2c1b9ff8p-2", "0x1.ce0a44eb17bccp-2")]
_A = [float.fromhex(h) for h in ("0x1.27616c9496e0bp-2", "-0x1.71969a075c67ap-2",
                                 "0x1.ec70a6ca7baddp-2", "-0x1.7154748bef6c8p-1",
                                 "0x1.71547652ab82bp0")]
#: bits of 2^(i/32) less i << 47 (glibc's __exp2f_data.tab), and the 2^s polynomial.
_EXP2 = [
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540]
_C = [float.fromhex(h) for h in ("0x1.c6af84b912394p-5", "0x1.ebfce50fac4f3p-3",
                                 "0x1.62e42ff0c52d6p-1")]

_I32, _I64, _F32, _F64 = ir.IntType(32), ir.IntType(64), ir.FloatType(), ir.DoubleType()


def _vec(t):
    return ir.VectorType(t, LANES)


def _splat(t, v):
    return ir.Constant(_vec(t), [ir.Constant(t, v)] * LANES)


def _lookup(builder, name, elem, values, index):
    """The table ``values`` (a constant global) read at each lane's ``index``."""
    arr = ir.ArrayType(elem, len(values))
    table = cgutils.global_constant(builder.module, name,
                                    ir.Constant(arr, [ir.Constant(elem, v) for v in values]))
    out = ir.Constant(_vec(elem), ir.Undefined)
    for lane in range(LANES):
        j = builder.extract_element(index, ir.Constant(_I32, lane))
        j = builder.zext(j, _I64) if j.type.width < 64 else j
        p = builder.gep(table, [ir.Constant(_I64, 0), j], inbounds=True)
        out = builder.insert_element(out, builder.load(p), ir.Constant(_I32, lane))
    return out


def _lane_pointer(context, builder, arrtype, arr, start, elem):
    data = context.make_array(arrtype)(context, builder, arr).data
    return builder.bitcast(builder.gep(data, [start]), _vec(elem).as_pointer())


def _lanes_kernel(fused):
    """An intrinsic writing ``out[s:s + LANES] = a[s:s + LANES] ** b`` (module doc), the
    multiply-adds fused (``fused``) or rounded twice."""
    def mad(builder, x, y, z):
        if not fused:
            return builder.fadd(builder.fmul(x, y), z)
        vt = _vec(_F64)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt] * 3),
                                            "llvm.fma.v%df64" % LANES)
        return builder.call(fn, [x, y, z])

    @intrinsic
    def lanes(typingctx, a, out, start, b):
        sig = types.void(a, out, types.intp, types.float64)

        def codegen(context, builder, sig, args):
            d = lambda v: _splat(_F64, float(v))      # noqa: E731
            ix = builder.load(_lane_pointer(context, builder, sig.args[0], args[0], args[2],
                                            _I32), align=4)
            tmp = builder.sub(ix, _splat(_I32, 0x3f330000))
            j = builder.and_(builder.lshr(tmp, _splat(_I32, 19)), _splat(_I32, 15))
            top = builder.and_(tmp, _splat(_I32, 0xff800000))
            z = builder.fpext(builder.bitcast(builder.sub(ix, top), _vec(_F32)), _vec(_F64))
            k = builder.sitofp(builder.ashr(top, _splat(_I32, 23)), _vec(_F64))
            r = mad(builder, z, _lookup(builder, "caffepy_powf_invc", _F64, _INVC, j), d(-1.0))
            y0 = builder.fadd(_lookup(builder, "caffepy_powf_logc", _F64, _LOGC, j), k)
            r2 = builder.fmul(r, r)
            y = mad(builder, d(_A[0]), r, d(_A[1]))
            p = mad(builder, d(_A[2]), r, d(_A[3]))
            r4 = builder.fmul(r2, r2)
            q = mad(builder, d(_A[4]), r, y0)
            q = mad(builder, p, r2, q)
            logx = mad(builder, y, r4, q)
            bv = builder.insert_element(ir.Constant(_vec(_F64), ir.Undefined), args[3],
                                        ir.Constant(_I32, 0))
            bv = builder.shuffle_vector(bv, bv, ir.Constant(_vec(_I32), [0] * LANES))
            t = builder.fmul(bv, logx)
            kd = builder.fadd(t, d(_ONE_AND_HALF_2_47))
            ki = builder.bitcast(kd, _vec(_I64))
            s = builder.fsub(t, builder.fsub(kd, d(_ONE_AND_HALF_2_47)))
            scale = _lookup(builder, "caffepy_exp2f_tab", _I64, _EXP2,
                            builder.and_(ki, _splat(_I64, 31)))
            scale = builder.bitcast(builder.add(scale, builder.shl(ki, _splat(_I64, 47))),
                                    _vec(_F64))
            zz = mad(builder, d(_C[0]), s, d(_C[1]))
            e = mad(builder, d(_C[2]), s, d(1.0))
            e = mad(builder, zz, builder.fmul(s, s), e)
            v = builder.fptrunc(builder.fmul(e, scale), _vec(_F32))
            v = builder.select(builder.fcmp_ordered("<=", t, d(_UNDERFLOW)), _splat(_F32, 0.0), v)
            v = builder.select(builder.fcmp_ordered(">", t, d(_OVERFLOW)),
                               _splat(_F32, float("inf")), v)
            builder.store(v, _lane_pointer(context, builder, sig.args[1], args[1], args[2], _F32),
                          align=4)
            return context.get_dummy_value()
        return sig, codegen
    return lanes


@intrinsic
def _special(typingctx, a, start):
    """Whether a[s:s + LANES] holds a zero, subnormal, negative, infinite or NaN input."""
    sig = types.boolean(a, types.intp)

    def codegen(context, builder, sig, args):
        ix = builder.load(_lane_pointer(context, builder, sig.args[0], args[0], args[1], _I32),
                          align=4)
        odd = builder.icmp_unsigned(">=", builder.sub(ix, _splat(_I32, 0x00800000)),
                                    _splat(_I32, 0x7f000000))
        bits = builder.bitcast(odd, ir.IntType(LANES))
        return builder.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(LANES), 0))
    return sig, codegen


_lanes_fused, _lanes_plain = _lanes_kernel(True), _lanes_kernel(False)
_opts = dict(parallel=True, cache=True, nogil=True, fastmath=False)


@njit(**_opts)
def powf(a, b, out, fused):
    """out = a ** b (float32, b finite and non-zero), glibc's FMA build's arithmetic where
    ``fused``, else its generic build's (the flag is the same for every block)."""
    n, bd = a.shape[0], np.float64(b)
    for blk in prange(n // LANES):
        s = blk * LANES
        if _special(a, s):
            for i in range(s, s + LANES):
                out[i] = a[i] ** b
        elif fused:
            _lanes_fused(a, out, s, bd)
        else:
            _lanes_plain(a, out, s, bd)
    for i in range(n - n % LANES, n):
        out[i] = a[i] ** b


def powf_fused(a, b, out):
    powf(a, b, out, True)


def powf_plain(a, b, out):
    powf(a, b, out, False)


#: the variants in the order they are tried: glibc runs its FMA build where the CPU has FMA.
VARIANTS = {"fused": powf_fused, "plain": powf_plain}
