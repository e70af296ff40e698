#include "kernels/isa.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace pocket::kernels {

namespace {

struct NameOf {
  Isa isa;
  const char* name;
};
constexpr NameOf kNames[] = {
    {Isa::Scalar, "scalar"}, {Isa::Avx2, "avx2"},       {Isa::AvxVnni, "avxvnni"}, {Isa::Avx512, "avx512"},
    {Isa::Avx512Vbmi, "avx512vbmi"}, {Isa::Amx, "amx"},
    {Isa::Neon, "neon"},     {Isa::Dotprod, "dotprod"}, {Isa::I8mm, "i8mm"},
};

#if defined(__x86_64__)
// XCR0 tells whether the OS saves the wider register state; CPUID alone
// is not enough to use AVX/AVX-512.
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// Asks Linux for the AMX tile data state (ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA, kernel 5.16+); the grant holds for the whole process.
bool amx_granted() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr int kReqXcompPerm = 0x1023, kXtileData = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
#else
  return false;
#endif
}

std::vector<Isa> detect() {
  std::vector<Isa> out{Isa::Scalar};
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return out;
  bool osxsave = c & bit_OSXSAVE, fma = c & bit_FMA, f16c = c & bit_F16C;
  if (!osxsave) return out;
  uint64_t xcr0 = xgetbv0();
  bool ymm_state = (xcr0 & 0x6) == 0x6;
  bool zmm_state = (xcr0 & 0xe6) == 0xe6;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return out;
  bool avx2 = b & bit_AVX2;
  if (!(ymm_state && avx2 && fma && f16c)) return out;
  out.push_back(Isa::Avx2);
  bool avx512 = (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) && (b & bit_AVX512DQ) &&
                (c & bit_AVX512VNNI);
  // AVX-VNNI: CPUID.(EAX=7, ECX=1):EAX bit 4; ymm state only.
  unsigned a1 = 0, b1, c1, d1;
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 4))) out.push_back(Isa::AvxVnni);
  if (!(zmm_state && avx512)) return out;
  out.push_back(Isa::Avx512);
  if (!(c & bit_AVX512VBMI)) return out;  // CPUID.(7,0):ECX bit 1
  out.push_back(Isa::Avx512Vbmi);
  // AMX-TILE and AMX-INT8: CPUID.(7,0):EDX bits 24 and 25; the OS must
  // enable the tile state in XCR0 (bits 17, 18) and, on Linux, grant it to
  // this process: without the grant the first tile instruction faults.
  // The grant enlarges every signal frame of the process by 8 KB (the tile
  // data), so it is asked for only if no lower level was forced with
  // POCKET_ISA: POCKET_ISA=avx512vbmi keeps the process as it was.
  const bool amx = (d & (1u << 24)) && (d & (1u << 25)) && (xcr0 & 0x60000) == 0x60000;
  const char* forced = std::getenv("POCKET_ISA");
  const bool lower_forced = forced && *forced && std::strcmp(forced, "amx") != 0 && isa_from_name(forced);
  if (amx && !lower_forced && amx_granted()) out.push_back(Isa::Amx);
  return out;
}
#elif defined(__aarch64__)
std::vector<Isa> detect() {
  std::vector<Isa> out{Isa::Scalar, Isa::Neon};  // Advanced SIMD is mandatory on AArch64
  unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  bool dotprod = hw & HWCAP_ASIMDDP, fp16 = (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP);
#ifdef HWCAP2_I8MM
  bool i8mm = hw2 & HWCAP2_I8MM;
#else
  bool i8mm = hw2 & (1UL << 13);
#endif
  if (dotprod && fp16) out.push_back(Isa::Dotprod);
  if (dotprod && fp16 && i8mm) out.push_back(Isa::I8mm);
  return out;
}
#else
std::vector<Isa> detect() { return {Isa::Scalar}; }
#endif

}  // namespace

const char* isa_name(Isa isa) {
  for (const auto& n : kNames)
    if (n.isa == isa) return n.name;
  return "?";
}

std::optional<Isa> isa_from_name(std::string_view name) {
  for (const auto& n : kNames)
    if (name == n.name) return n.isa;
  return std::nullopt;
}

std::vector<Isa> supported_isas() {
  static const std::vector<Isa> isas = detect();
  return isas;
}

Isa selected_isa() {
  static const Isa chosen = [] {
    std::vector<Isa> isas = supported_isas();
    Isa best = isas.back();
    const char* env = std::getenv("POCKET_ISA");
    if (env == nullptr || *env == '\0') return best;
    std::optional<Isa> want = isa_from_name(env);
    if (!want) return best;  // unknown names are ignored rather than fatal
    for (Isa i : isas)
      if (i == *want) return i;
    return best;
  }();
  return chosen;
}

}  // namespace pocket::kernels
