// Output files that appear whole or not at all: the bytes go to a temporary
// file beside the destination, which is flushed, synced and renamed over it
// only when everything was written. A full disk, an error or an exception
// part way leaves the destination as it was and removes the temporary.
#pragma once
#include <functional>
#include <ostream>
#include <string>

namespace pocket {

// Calls write(out) with a stream on a temporary file in the directory of
// `path`, then renames it to `path`. Throws pocket::Error naming `path` on
// any failure (including a stream left in a failed state by write).
void write_file_atomically(const std::string& path, const std::function<void(std::ostream& out)>& write);

}  // namespace pocket
