// Turns a SIGBUS on a memory-mapped input file into one clear error line.
//
// Model weights are read in place from a mapping. If the file is truncated
// (or rewritten shorter) on disk while it is mapped, touching a page past the
// new end raises SIGBUS, which would otherwise kill the process with no word
// of why. Mapped files register their address range here; the first
// registration installs a SIGBUS handler that, for a fault inside a
// registered range, writes
//   pocket: error: PATH: the file was truncated or replaced while in use
//   (reading byte N failed); reopen it
// to stderr and ends the process with exit code 1. A fault outside every
// registered range goes to the handler that was installed before (or the
// default action). What cannot be caught: a file rewritten in place with
// other bytes of the same length is read as those bytes (Pocket maps files
// MAP_PRIVATE, which protects only against its own writes).
#pragma once
#include <cstddef>
#include <string>

namespace pocket {

// Returns a slot for unregister_mapping, or -1 when every slot is taken (the
// range is then unguarded: a SIGBUS in it is not reported by name).
int register_mapping(const void* begin, size_t size, const std::string& path);
void unregister_mapping(int slot);

}  // namespace pocket
