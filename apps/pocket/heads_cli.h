// Options and helpers shared by the decision-head commands (train-head,
// classify, route, rank).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "cli_common.h"
#include "heads/dataset.h"
#include "heads/head.h"

namespace pocket::cli {

// --format, --text-col, --label-col, --query-col, --no-header.
void add_data_options(CLI::App& app, heads::DataOptions& d);
// The model's content hash (what heads name as their base).
std::string content_hash(const LoadedModel& m, int threads);
// Feature cache folder: $POCKET_CACHE_DIR, else $XDG_CACHE_HOME/pocket/features, else ~/.cache/pocket/features.
std::string default_feature_cache();
// Loads a head (file, or Pocket file[#name]) and checks it belongs to `m`.
heads::Head load_checked_head(const std::string& spec, const LoadedModel& m, int threads);
// "a,b,c" -> {"a","b","c"}.
std::vector<std::string> split_commas(const std::string& s);

}  // namespace pocket::cli
