// The one exception type Pocket throws: on bad files, bad input and bad
// options. Its message names the file/field/option at fault; its code says
// what kind of failure it is, for callers that react to some kinds (a prompt
// that no longer fits, a cancelled load) and for the C API's error codes.
#pragma once
#include <stdexcept>
#include <string>

namespace pocket {

enum class ErrorCode {
  Failed,           // anything else: a bad or unreadable file, a failed read, ...
  InvalidArgument,  // an option or argument out of range, an empty prompt
  ContextFull,      // the prompt (or the conversation so far) does not fit the context
  Cancelled,        // the caller asked to stop (a load's progress callback said no)
  Busy,             // another thread is running a call on the same engine
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ErrorCode code = ErrorCode::Failed)
      : std::runtime_error(what), code_(code) {}
  explicit Error(const char* what, ErrorCode code = ErrorCode::Failed) : std::runtime_error(what), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace pocket
