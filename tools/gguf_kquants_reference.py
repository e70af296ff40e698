#!/usr/bin/env python3
"""Independent reference dequantizer for llama.cpp's GGUF block types
Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K, and the writer of
the golden file tests/data/formats/gguf_kquants_golden.json.

Written from the format descriptions (ggml's block structs and dequantize
rules), element by element: each element's value is computed from its index
as an exact rational number (fractions.Fraction) and rounded once to IEEE
float32 (round to nearest, ties to even). Pocket's C++ loops over blocks
instead; the golden test compares the two bit for bit. One rounding is what
the C++ code does too: with fp16 scales every product d * sc * q is exact in
float32, so only the final "+ m" (or Q8_K's float32 d * q) rounds.

Pure Python (no numpy). Usage:
    python3 tools/gguf_kquants_reference.py [output.json]
"""
import json
import random
import struct
import sys
from fractions import Fraction

QK_K = 256

# name: (GGUF type id, elements per block, bytes per block)
TYPES = {
    "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24),
    "Q2_K": (10, QK_K, 84),
    "Q3_K": (11, QK_K, 110),
    "Q4_K": (12, QK_K, 144),
    "Q5_K": (13, QK_K, 176),
    "Q6_K": (14, QK_K, 210),
    "Q8_K": (15, QK_K, 292),
}

# Byte offsets of the fp16/f32 scale fields in each block (kept finite).
HALF_FIELDS = {
    "Q4_1": [0, 2],
    "Q5_0": [0],
    "Q5_1": [0, 2],
    "Q2_K": [80, 82],
    "Q3_K": [108],
    "Q4_K": [0, 2],
    "Q5_K": [0, 2],
    "Q6_K": [208],
    "Q8_K": [],
}


# --- exact arithmetic -------------------------------------------------------

def half_value(b, off):
    """IEEE binary16 at b[off:off+2] (little-endian) as an exact Fraction."""
    h = b[off] | b[off + 1] << 8
    sign = -1 if h & 0x8000 else 1
    e = (h >> 10) & 0x1F
    m = h & 0x3FF
    if e == 31:
        raise ValueError("fp16 inf/nan in a scale field")
    if e == 0:
        return sign * Fraction(m, 1 << 24)
    return sign * Fraction(1024 + m) * Fraction(2) ** (e - 25)


def f32_value(b, off):
    (f,) = struct.unpack_from("<f", bytes(b), off)
    return Fraction(f)  # exact: every float is a dyadic rational


def round_f32(x):
    """Rounds an exact rational to the nearest float32 (ties to even); raises
    on overflow. Returns the float32 bit pattern."""
    if x == 0:
        return 0
    neg = x < 0
    a = -x if neg else x
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    q = max(e - 23, -149)  # quantum: 24 significant bits, or the subnormal step
    scaled = a / Fraction(2) ** q
    n = scaled.numerator // scaled.denominator
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    r = Fraction(n) * Fraction(2) ** q
    if r >= Fraction(2) ** 128:
        raise OverflowError("value beyond float32 range")
    (bits,) = struct.unpack("<I", struct.pack("<f", float(r)))  # float(r) is exact here
    return bits | (0x80000000 if neg else 0)


def s8(v):
    return v - 256 if v >= 128 else v


# --- per-element definitions --------------------------------------------------
# Each returns the exact value of element i (0 <= i < block size) of block b.

def q4_1(b, i):
    d, m = half_value(b, 0), half_value(b, 2)
    byte = b[4 + i % 16]
    q = byte & 15 if i < 16 else byte >> 4
    return d * q + m


def q5_bits(b, qh_off, qs_off, i):
    qh = int.from_bytes(bytes(b[qh_off:qh_off + 4]), "little")
    byte = b[qs_off + i % 16]
    lo = byte & 15 if i < 16 else byte >> 4
    return lo + 16 * ((qh >> i) & 1)


def q5_0(b, i):
    return half_value(b, 0) * (q5_bits(b, 2, 6, i) - 16)


def q5_1(b, i):
    return half_value(b, 0) * q5_bits(b, 4, 8, i) + half_value(b, 2)


def two_bit_code(qs, i):
    """The 2-bit field of element i in Q2_K/Q3_K's qs[64]: each 128-element
    half owns 32 bytes; element r of a half is bits 2*(r // 32) of byte r % 32."""
    half, r = divmod(i, 128)
    return (qs[32 * half + r % 32] >> (2 * (r // 32))) & 3


def q2_k(b, i):
    sc = b[i // 16]  # one byte per 16 elements: scale (low nibble), min (high nibble)
    d, dmin = half_value(b, 80), half_value(b, 82)
    return d * (sc & 15) * two_bit_code(b[16:80], i) - dmin * (sc >> 4)


def q3_k_scales(s):
    """The sixteen 6-bit scales of Q3_K, unpacked the way ggml does it with
    32-bit words: words 0-1 give low nibbles, word 2 the 2-bit high parts."""
    w = [int.from_bytes(bytes(s[4 * k:4 * k + 4]), "little") for k in range(3)]
    k1, k2 = 0x03030303, 0x0F0F0F0F
    out_words = [
        (w[0] & k2) | (((w[2] >> 0) & k1) << 4),
        (w[1] & k2) | (((w[2] >> 2) & k1) << 4),
        ((w[0] >> 4) & k2) | (((w[2] >> 4) & k1) << 4),
        ((w[1] >> 4) & k2) | (((w[2] >> 6) & k1) << 4),
    ]
    return [((ow >> (8 * j)) & 0xFF) - 32 for ow in out_words for j in range(4)]


def q3_k(b, i):
    hmask, qs, scales = b[0:32], b[32:96], q3_k_scales(b[96:108])
    d = half_value(b, 108)
    half, r = divmod(i, 128)
    high = (hmask[r % 32] >> (4 * half + r // 32)) & 1
    code = two_bit_code(qs, i) - (0 if high else 4)
    return d * scales[i // 16] * code


def k4_scale_min(s, j):
    """(scale, min) of sub-block j of Q4_K/Q5_K from the 12 packed bytes."""
    if j < 4:
        return s[j] & 63, s[j + 4] & 63
    return (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)


def q4_k(b, i):
    d, dmin = half_value(b, 0), half_value(b, 2)
    j, l = divmod(i, 32)  # sub-block of 32, position in it
    sc, m = k4_scale_min(b[4:16], j)
    q = (b[16 + 32 * (j // 2) + l] >> (4 * (j % 2))) & 15
    return d * sc * q - dmin * m


def q5_k(b, i):
    d, dmin = half_value(b, 0), half_value(b, 2)
    j, l = divmod(i, 32)
    sc, m = k4_scale_min(b[4:16], j)
    q = ((b[48 + 32 * (j // 2) + l] >> (4 * (j % 2))) & 15) | (((b[16 + l] >> j) & 1) << 4)
    return d * sc * q - dmin * m


def q6_k(b, i):
    ql, qh, scales = b[0:128], b[128:192], b[192:208]
    d = half_value(b, 208)
    half, r = divmod(i, 128)
    k, l = divmod(r, 32)
    lo = (ql[64 * half + l + 32 * (k % 2)] >> (4 * (k // 2))) & 15
    hi = (qh[32 * half + l] >> (2 * k)) & 3
    return d * s8(scales[i // 16]) * ((lo | hi << 4) - 32)


def q8_k(b, i):
    return f32_value(b, 0) * s8(b[4 + i])


DEQUANT = {"Q4_1": q4_1, "Q5_0": q5_0, "Q5_1": q5_1, "Q2_K": q2_k, "Q3_K": q3_k,
           "Q4_K": q4_k, "Q5_K": q5_k, "Q6_K": q6_k, "Q8_K": q8_k}


def dequantize(name, data, n):
    _, be, bb = TYPES[name]
    assert n % be == 0 and len(data) == n // be * bb
    out = []
    for k in range(n // be):
        blk = data[k * bb:(k + 1) * bb]
        out.extend(round_f32(DEQUANT[name](blk, i)) for i in range(be))
    return out


# --- golden data ---------------------------------------------------------------

def random_half(rng, subnormal=False):
    """Random finite fp16 bits; exponents 1..30, or 0 for a subnormal."""
    e = 0 if subnormal else rng.randint(1, 30)
    return rng.getrandbits(1) << 15 | e << 10 | rng.getrandbits(10)


def random_block(rng, name, index):
    _, _, bb = TYPES[name]
    b = [rng.getrandbits(8) for _ in range(bb)]
    for n, off in enumerate(HALF_FIELDS[name]):
        h = random_half(rng, subnormal=(index == 3 and n == 0))  # block 3: a subnormal d
        b[off], b[off + 1] = h & 0xFF, h >> 8
    if name == "Q8_K":  # f32 d of moderate size (no overflow in d * 127)
        bits = rng.getrandbits(1) << 31 | rng.randint(100, 140) << 23 | rng.getrandbits(23)
        b[0:4] = list(struct.pack("<I", bits))
    return b


def golden(seed=20240611):
    rng = random.Random(seed)
    cases = []
    for name, (type_id, be, _) in TYPES.items():
        rows, cols = 2, 2 * be  # 2 x 2 blocks: also checks block and row strides
        data = []
        for k in range(rows * cols // be):
            data.extend(random_block(rng, name, k))
        cases.append({
            "type": name,
            "gguf_type_id": type_id,
            "rows": rows,
            "cols": cols,
            "data_hex": bytes(data).hex(),
            "values_f32_bits": dequantize(name, data, rows * cols),
        })
    return {
        "generator": "tools/gguf_kquants_reference.py",
        "note": "values are float32 bit patterns, row-major; each is the exact value rounded once to float32",
        "cases": cases,
    }


def self_check():
    """Hand-made blocks whose values are obvious, so a slip in this file shows."""
    one = [0x00, 0x3C]  # fp16 1.0
    # Q4_K: d = 1, dmin = 1, all sub-blocks scale 1 and min 2 -> value = q - 2.
    b = one + one + [1, 1, 1, 1, 2, 2, 2, 2, 0x21, 0x21, 0x21, 0x21] + [0x53] * 128
    assert [q4_k(b, i) for i in (0, 32, 255)] == [1, 3, 3]
    # Q6_K: d = 1, scales 1, ql = 0x21, qh = 0 -> low nibble 1 - 32, high nibble 2 - 32.
    b = [0x21] * 128 + [0] * 64 + [1] * 16 + one
    assert q6_k(b, 0) == -31 and q6_k(b, 64) == -30
    # Q3_K: scales all 32 + 1 (low nibble 1, high bits 2), hmask all set -> value = code.
    b = [0xFF] * 32 + [0b11100100] * 64 + [0x11] * 8 + [0xAA] * 4 + one
    assert [q3_k(b, i) for i in (0, 32, 64, 96)] == [0, 1, 2, 3]
    assert round_f32(Fraction(1, 3)) == 0x3EAAAAAB and round_f32(Fraction(-2) ** -149) == 0x80000001


def main():
    self_check()
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/formats/gguf_kquants_golden.json"
    with open(out, "w") as f:
        json.dump(golden(), f, separators=(",", ":"))
        f.write("\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
