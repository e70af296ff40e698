#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "util/error.h"

namespace pocket {

namespace {

// A new file beside `path` (same file system, so the rename is atomic),
// created with the usual permissions (0666 less the umask, as a plain open
// would), under a name no other writer uses.
std::string make_temp(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      return tmp;
    }
    if (errno != EEXIST) fail(path, ": cannot create a temporary file beside it: ", std::strerror(errno));
  }
  fail(path, ": cannot find an unused temporary name beside it");
}

void sync_file(const std::string& path, const std::string& tmp) {
  int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot reopen ", tmp, ": ", std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) fail(path, ": cannot write ", tmp, " to disk: ", std::strerror(err));
}

}  // namespace

void write_file_atomically(const std::string& path, const std::function<void(std::ostream& out)>& write) {
  const std::string tmp = make_temp(path);
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, ": cannot open ", tmp, " for writing");
    write(out);
    out.flush();
    if (!out) fail(path, ": write error (disk full?)");
    out.close();
    if (!out) fail(path, ": write error (disk full?)");
    sync_file(path, tmp);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, ": cannot rename ", tmp, ": ", std::strerror(errno));
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

}  // namespace pocket
