// SharedModel's private state, seen by the classes of the public API that
// build on a loaded model (Engine, Decider).
#pragma once
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "pocket/pocket.h"
#include "runtime/loader.h"

namespace pocket {

struct SharedModel::Impl {
  LoadedModel model;
  std::string path;
  std::function<void(LogLevel, std::string_view)> on_log;
  LogLevel log_level = LogLevel::Info;
  mutable std::mutex log_mu;  // the log callback never runs concurrently for one model
};

}  // namespace pocket
