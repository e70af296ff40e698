// Instruction-set levels the kernels are built for, run-time detection and
// the POCKET_ISA override. Internal to src/kernels and the tests.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

namespace pocket::kernels {

// Ordered from least to most capable within each architecture.
// AvxVnni: AVX2 with the VEX-encoded VNNI dots (Alder Lake and later client
// cores, Sapphire Rapids, Zen 5); a CPU may have it, AVX-512, both or neither.
// Avx512Vbmi: the Avx512 level plus AVX512_VBMI's byte permutes (Ice Lake
// and later, Zen 4); the same results bit for bit, faster nibble unpacking.
// Amx: Avx512Vbmi plus the AMX-INT8 tile unit (Sapphire Rapids and later)
// for matmuls of several tokens; again the same results bit for bit.
enum class Isa { Scalar, Avx2, AvxVnni, Avx512, Avx512Vbmi, Amx, Neon, Dotprod, I8mm };

const char* isa_name(Isa isa);
std::optional<Isa> isa_from_name(std::string_view name);

// Levels this CPU can run (always includes Scalar), lowest first.
std::vector<Isa> supported_isas();

// The level the public entry points use: the best supported one, or the one
// named by POCKET_ISA if the CPU supports it (a request above what the CPU
// supports falls back to the best supported level). Decided once.
Isa selected_isa();

}  // namespace pocket::kernels
