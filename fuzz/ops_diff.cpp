// fuzz_ops_diff: differential fuzzing of attention and the element-wise ops
// (the matmuls have fuzz_kernels_diff). Byte 0 picks the op, the next bytes
// the sizes and a magnitude, the rest (cycled) the values. Every level this
// CPU runs (supported_isas()) computes the op on the same input as the
// scalar reference of src/kernels/scalar.cpp, and must agree:
//  - f32 <-> f16 rows: bit for bit (NaN stays NaN; its payload may differ);
//  - rmsnorm, softmax, swiglu, geglu, rope: |a - r| <= 1e-5 |r| + floor, the
//    floor as the unit tests state it (1e-6; 1e-9 for softmax; for rope, whose
//    x0 c - x1 s may cancel, 4 eps (|x0| + |x1|) + 1e-6), with the
//    inputs spread over 2^-8..2^15 so the exp/tanh/sigmoid approximations
//    meet their overflow and underflow ends; NaN where the reference is
//    finite (or the reverse) is always a finding;
//  - attention over fp16 K/V, or int8 or 4-bit K/V rows with a scale each
//    (the q8 and q4 caches; 1-4 queries of one GQA group, contexts 1-96, sliding-window
//    starts): within (1e-5 + 4 ds) (1 + max|v|), ds being the score
//    rounding bound head_dim * FLT_EPSILON * scale * max_t sum|q k_t| over
//    the values as stored (the levels sum the dot products in different
//    orders; int8 and 4-bit values convert to float exactly).
// Each level runs on its own copy, so a kernel that reads or writes past its
// row is an ASan report.
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/table.h"
#include "util/half.h"

namespace {

using namespace pocket;
using namespace pocket::kernels;

std::vector<float> values(fuzz::Stream& in, size_t n, int max_exp) {
  std::vector<float> v(n);
  for (float& x : v) {
    const int e = static_cast<int>(in.next() % (max_exp + 9)) - 8;
    x = std::ldexp(static_cast<float>(static_cast<int8_t>(in.next())) / 128.0f, e);
  }
  return v;
}

// `floors`, when given, holds a per-element floor (rope's cancellation bound).
void compare(const std::vector<float>& a, const std::vector<float>& r, float rel, float floor, const char* op, Isa isa,
             const std::vector<float>* floors = nullptr) {
  for (size_t i = 0; i < r.size(); ++i) {
    const float f = floors ? (*floors)[i] : floor;
    const bool ok = std::isnan(r[i]) ? std::isnan(a[i]) : (a[i] == r[i] || std::fabs(a[i] - r[i]) <= rel * std::fabs(r[i]) + f);
    if (!ok)
      fuzz::finding(std::string(op) + " on " + isa_name(isa) + ": element " + std::to_string(i) + " is " +
                    std::to_string(a[i]) + ", the scalar reference " + std::to_string(r[i]));
  }
}

void attention_case(fuzz::Stream& in, const KernelTable& ref, Isa isa, const KernelTable& t) {
  const int head_dim = 4 * (1 + in.next() % 32);  // 4..128
  const int n_q = 1 + in.next() % 4;
  const int max_ctx = 1 + in.next() % 96;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim)) * (0.25f + static_cast<float>(in.next() % 8) / 4.0f);
  std::vector<float> q = values(in, static_cast<size_t>(n_q) * head_dim, 4);
  std::vector<float> kf = values(in, static_cast<size_t>(max_ctx) * head_dim, 4), vf = values(in, kf.size(), 6);
  enum { kF16, kQ8, kQ4 };
  const int kv = in.next() % 3;
  std::vector<uint16_t> k(kf.size()), v(vf.size());
  std::vector<int8_t> k8(kf.size()), v8(vf.size());
  std::vector<uint8_t> k4(kf.size() / 2), v4(vf.size() / 2);
  std::vector<float> ks(static_cast<size_t>(max_ctx)), vs(ks.size());
  if (kv == kQ8) {  // the cache's rows as stored, and kf / vf the values they hold
    for (int p = 0; p < max_ctx; ++p) {
      const size_t o = static_cast<size_t>(p) * head_dim;
      quantize_row_q8(&kf[o], &k8[o], &ks[p], head_dim);
      quantize_row_q8(&vf[o], &v8[o], &vs[p], head_dim);
      for (int d = 0; d < head_dim; ++d) kf[o + d] = k8[o + d] * ks[p], vf[o + d] = v8[o + d] * vs[p];
    }
  } else if (kv == kQ4) {
    for (int p = 0; p < max_ctx; ++p) {
      const size_t o = static_cast<size_t>(p) * head_dim;
      uint8_t *kr = &k4[o / 2], *vr = &v4[o / 2];
      quantize_row_q4(&kf[o], kr, &ks[p], head_dim);
      quantize_row_q4(&vf[o], vr, &vs[p], head_dim);
      for (int d = 0; d < head_dim; ++d)
        kf[o + d] = q4_code(kr, d, head_dim) * ks[p], vf[o + d] = q4_code(vr, d, head_dim) * vs[p];
    }
  } else {
    ref.f32_to_f16_row(kf.data(), k.data(), static_cast<int64_t>(k.size()));
    ref.f32_to_f16_row(vf.data(), v.data(), static_cast<int64_t>(v.size()));
    ref.f16_to_f32_row(k.data(), kf.data(), static_cast<int64_t>(k.size()));
    ref.f16_to_f32_row(v.data(), vf.data(), static_cast<int64_t>(v.size()));
  }
  std::vector<int> n_ctx(n_q), first(n_q);
  for (int j = 0; j < n_q; ++j) {
    n_ctx[j] = std::max(1, max_ctx - (n_q - 1 - j));  // consecutive tokens of a causal prefill
    first[j] = in.next() % 4 == 0 ? static_cast<int>(in.next() % n_ctx[j]) : 0;  // a sliding window
  }
  float ds = 0, vmax = 0;
  for (float x : vf) vmax = std::max(vmax, std::fabs(x));
  for (int j = 0; j < n_q; ++j)
    for (int p = first[j]; p < n_ctx[j]; ++p) {
      float s = 0;
      for (int d = 0; d < head_dim; ++d) s += std::fabs(q[j * head_dim + d] * kf[static_cast<size_t>(p) * head_dim + d]);
      ds = std::max(ds, head_dim * FLT_EPSILON * scale * s);
    }
  auto run = [&](const KernelTable& tab) {
    std::vector<float> out(static_cast<size_t>(n_q) * head_dim, -7.0f), scratch(static_cast<size_t>(n_q) * max_ctx);
    AttentionQueries qs;
    qs.n = n_q;
    for (int j = 0; j < n_q; ++j) {
      qs.q[j] = q.data() + j * head_dim;
      qs.out[j] = out.data() + j * head_dim;
      qs.n_ctx[j] = n_ctx[j];
      qs.first[j] = first[j];
    }
    if (kv == kQ8)
      tab.attention_heads_q8(qs, {k8.data(), ks.data()}, {v8.data(), vs.data()}, head_dim, scale, scratch.data());
    else if (kv == kQ4)
      tab.attention_heads_q4(qs, {k4.data(), ks.data()}, {v4.data(), vs.data()}, head_dim, scale, scratch.data());
    else
      tab.attention_heads(qs, k.data(), v.data(), head_dim, scale, scratch.data());
    return out;
  };
  const float tol = (1e-5f + 4.0f * ds) * (1.0f + vmax);
  const char* names[] = {"attention_heads", "attention_heads_q8", "attention_heads_q4"};
  compare(run(t), run(ref), 0.0f, tol, names[kv], isa);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Bytes head(data, size);
  const uint8_t op = head.take_byte() % 7;
  const int n = 1 + (head.take_byte() | head.take_byte() << 8) % 1200;
  const int max_exp = head.take_byte() % 16;  // values up to 2^max_exp
  const std::string rest(head.rest());
  const KernelTable& ref = kernel_table(Isa::Scalar);
  for (Isa isa : supported_isas()) {
    if (isa == Isa::Scalar) continue;
    const KernelTable& t = kernel_table(isa);
    fuzz::Stream in(rest);  // every level sees the same values
    std::vector<float> x = values(in, static_cast<size_t>(n), max_exp), w = values(in, static_cast<size_t>(n), 3);
    std::vector<float> a = x, r = x;
    switch (op) {
      case 0: {
        std::vector<float> ya(n), yr(n);
        const float eps = (in.next() & 1) ? 1e-6f : 1e-5f;
        t.rmsnorm(ya.data(), x.data(), w.data(), n, eps);
        ref.rmsnorm(yr.data(), x.data(), w.data(), n, eps);
        compare(ya, yr, 1e-5f, 1e-6f, "rmsnorm", isa);
        break;
      }
      case 1:
        t.softmax(a.data(), n), ref.softmax(r.data(), n);
        compare(a, r, 1e-5f, 1e-9f, "softmax", isa);
        break;
      case 2:
        t.swiglu(a.data(), w.data(), n), ref.swiglu(r.data(), w.data(), n);
        compare(a, r, 1e-5f, 1e-6f, "swiglu", isa);
        break;
      case 3:
        t.geglu(a.data(), w.data(), n), ref.geglu(r.data(), w.data(), n);
        compare(a, r, 1e-5f, 1e-6f, "geglu", isa);
        break;
      case 4: {
        const int hd = 2 * (1 + in.next() % 64), heads = 1 + in.next() % 4;
        const int pos = in.next() | (in.next() & 0x3f) << 8;  // 0..16383
        const float theta = (in.next() & 1) ? 1e6f : 1e4f;
        const RopeStyle st = (in.next() & 1) ? RopeStyle::Halves : RopeStyle::Adjacent;
        std::vector<float> inv(static_cast<size_t>(hd / 2));
        for (int i = 0; i < hd / 2; ++i) inv[i] = std::pow(theta, -2.0f * static_cast<float>(i) / static_cast<float>(hd));
        a = values(in, static_cast<size_t>(hd) * heads, max_exp), r = a;
        // x0 c - x1 s may cancel, and a level may fuse one product into the
        // other (FMA): each element is within 4 eps (|x0| + |x1|) of the
        // reference, plus 1e-6, not within a bound relative to itself.
        std::vector<float> floors(a.size());
        for (int h = 0; h < heads; ++h)
          for (int i = 0; i < hd / 2; ++i) {
            const int p0 = h * hd + (st == RopeStyle::Halves ? i : 2 * i), p1 = h * hd + (st == RopeStyle::Halves ? i + hd / 2 : 2 * i + 1);
            floors[p0] = floors[p1] = 4.0f * FLT_EPSILON * (std::fabs(a[p0]) + std::fabs(a[p1])) + 1e-6f;
          }
        t.rope(a.data(), heads, hd, pos, st, inv.data()), ref.rope(r.data(), heads, hd, pos, st, inv.data());
        compare(a, r, 1e-5f, 0.0f, "rope", isa, &floors);
        break;
      }
      case 5: {
        // f32 -> f16 on raw bit patterns too (NaN, inf, subnormals), bitwise.
        std::vector<float> bits(static_cast<size_t>(n));
        for (float& f : bits) {
          const uint32_t u = in.next() | in.next() << 8 | in.next() << 16 | static_cast<uint32_t>(in.next()) << 24;
          std::memcpy(&f, &u, 4);
        }
        std::vector<uint16_t> ha(n), hr(n);
        t.f32_to_f16_row(bits.data(), ha.data(), n), ref.f32_to_f16_row(bits.data(), hr.data(), n);
        for (int i = 0; i < n; ++i) {
          const bool nan = (hr[i] & 0x7c00) == 0x7c00 && (hr[i] & 0x3ff);
          if (nan ? !((ha[i] & 0x7c00) == 0x7c00 && (ha[i] & 0x3ff)) : ha[i] != hr[i])
            fuzz::finding(std::string("f32_to_f16_row on ") + isa_name(isa) + " differs at " + std::to_string(i));
        }
        std::vector<float> fa(n), fr(n);
        t.f16_to_f32_row(hr.data(), fa.data(), n), ref.f16_to_f32_row(hr.data(), fr.data(), n);
        for (int i = 0; i < n; ++i)
          if (std::isnan(fr[i]) ? !std::isnan(fa[i]) : std::memcmp(&fa[i], &fr[i], 4) != 0)
            fuzz::finding(std::string("f16_to_f32_row on ") + isa_name(isa) + " differs at " + std::to_string(i));
        break;
      }
      default:
        attention_case(in, ref, isa, t);
        break;
    }
  }
  return 0;
}
