// Process and machine measurements for `pocket bench`: resident memory,
// CPU time, RAPL energy and read bandwidth. Linux only (/proc, /sys).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pocket::bench {

// A field of /proc/self/status in kB ("VmRSS", "VmHWM"); nullopt if absent.
std::optional<uint64_t> proc_status_kb(const char* field);
// Proportional set size from /proc/self/smaps_rollup (a page shared by k
// mappings counts 1/k in each): what the process holds when pages are
// shared copy-on-write. nullopt where not readable.
std::optional<uint64_t> pss_kb();
// The anonymous and shared-memory part of it (Pss_Anon + Pss_Shmem): the
// process's own data and memfd/shm mappings, without file-backed pages,
// whose share moves whenever another process maps or unmaps the same
// libraries or files (parallel test runs).
std::optional<uint64_t> pss_memory_kb();
// The same field in MiB; throws when it is absent.
double rss_mb(const char* field);
// Resets VmHWM to the current RSS (Linux clear_refs "5"); false where the
// kernel or a sandbox does not allow it.
bool reset_peak_rss();

// CPU seconds used by this process (all threads, user + system).
double process_cpu_seconds();

// Package energy counter in microjoules (/sys/class/powercap/intel-rapl:0),
// or nullopt when not readable (VMs, no permission).
std::optional<uint64_t> rapl_energy_uj();
// The counter's wrap-around range, for differences across a wrap.
std::optional<uint64_t> rapl_max_energy_uj();

// Read bandwidth in bytes/s: `threads` threads each sum their slice of a
// `bytes`-sized buffer; median of `reps` passes (after one untimed pass that
// also faults the pages in). The buffer is freed before returning.
double measure_read_bandwidth(int threads, uint64_t bytes, int reps);
// The probe's read of one thread's slice [b, e) of `buf`: every element
// once, in four staggered streams (system.cpp says why); their sum.
uint64_t sum_in_streams(const uint64_t* buf, int64_t b, int64_t e);

// A sysfs cache size ("300M", "2048K", "32768", with or without a trailing
// newline) in bytes; nullopt when it is not one.
std::optional<uint64_t> parse_cache_size(std::string_view text);
// The largest cache of the highest level listed under `dir`
// (index*/level and index*/size, as /sys/devices/system/cpu/cpu0/cache):
// the last-level cache, shared by the cores that report it. Weights that
// fit in it can be read from it rather than from memory, so decode can run
// faster than a memory-bandwidth probe (on a 300 MiB-L3 server, a 171 MB
// model decoded at 1.3-1.6x the probe's rate). nullopt where not readable.
std::optional<uint64_t> last_level_cache_bytes(const std::string& dir = "/sys/devices/system/cpu/cpu0/cache");

}  // namespace pocket::bench
