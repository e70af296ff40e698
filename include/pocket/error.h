// The one exception type Pocket throws: on bad files, bad input and bad
// options. Its message names the file/field/option at fault.
#pragma once
#include <stdexcept>

namespace pocket {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace pocket
