// Opens a model file of any supported format and builds everything needed
// to run it: the fast Model, the Tokenizer and the chat template family.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "budget/memory_plan.h"
#include "formats/model_file.h"
#include "generate/chat.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pocket {

struct LoadedModel {
  std::shared_ptr<const ModelFile> file;
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  ChatFormat chat_format = ChatFormat::Raw;
  bool chat_template_recognised = true;
  std::optional<MemoryPlan> plan;  // with a memory budget: what fits it
};

// `progress`, when set, is called with the fraction loaded (0 at the start,
// 1 at the end, rising as the weights are read); returning false stops the
// load with an Error of code ErrorCode::Cancelled. With a `budget`
// (budget_mb > 0), the memory plan is made from the headers before the
// weight pages are touched: a budget the model and a session cannot fit
// is refused before they use it (plan_memory's error); the plan is kept.
LoadedModel load_model(const std::string& path, const OpenOptions& opts = {},
                       const std::function<bool(float)>& progress = {}, const MemoryRequest* budget = nullptr);

// The plan for `request` on an open model file (its context checked and
// its largest default context filled in as resolve_context does).
MemoryPlan plan_for(const ModelFile& file, MemoryRequest request);

// Worker threads for a request of `requested` (0 = one per hardware thread).
int resolve_threads(int requested);

// Context size for a request of `requested` tokens (0 = the model's context
// length, capped at 4096 to bound the KV cache reservation). Fails with a
// clear message for a negative size or one beyond the model's.
int resolve_context(int requested, const ModelConfig& cfg);

// The model `pocket run` uses without -m: $POCKET_MODEL, else the
// stories260K model in the shared folder the build was configured with.
std::string default_model_path(const std::string& shared_dir);

}  // namespace pocket
