// The token sequence a request asks the model to continue: chat messages
// through the model's chat template (message text encoded as plain text,
// so control tokens cannot be injected), or a completion prompt as text.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/loader.h"
#include "server/api.h"

namespace pocket::server {

std::vector<int32_t> prompt_tokens(const LoadedModel& model, const CompletionRequest& request, bool enable_thinking);

}  // namespace pocket::server
