#pragma once
// One replay result as a JSON object and as a table row, from the same data, for `vram replay`, `fit`
// and `demo`. The JSON keys are documented in docs/cli.md.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vram/replay/replay.hpp"

namespace vram {

/// @brief The JSON object of one trace x policy (fit_bytes added when @p fit_bytes is given).
nlohmann::json to_json(const replay_result& r);

/// @brief Each result's driver calls by kind and its allocator's own counters, those at zero left out: two
/// lines per result, the trace and policy on the first.
std::string format_replay_counters(const std::vector<replay_result>& results);

/// @brief A table with one row per result; with a fit column when @p fits is not empty (same order).
std::string format_replay_table(const std::vector<replay_result>& results,
                                const std::vector<std::optional<std::size_t>>& fits = {});

}  // namespace vram
