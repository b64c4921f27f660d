#pragma once
// The two faces of a bench result, made from the same rows: a table for people and a JSON object for
// programs.
//
// JSON: {"device", "simulated", "date", "command", "baseline", "seconds_per_cell", "pairs_per_thread"
// (null: time alone), "sizes", "threads", "allocators", "notes", "rows": [{"allocator", "size" (bytes),
// "threads", "pairs", "seconds", "ns_per_pair", "pairs_per_second", "cpu_ns_per_pair", "cpu_share" (thread
// CPU time over thread time), "ratio" (pairs/s over the baseline's in the same cell; the baseline's own is 1), "ratio_to" (the baseline's name), "scaling" (pairs/s over this
// allocator's at 1 thread), "error" (only in a failed row)}]}. A figure that cannot be had is null.

#include <string>

#include <nlohmann/json.hpp>

#include "vram/measure/bench_suite.hpp"

namespace vram::measure {

/// @brief The result as JSON (the layout above).
nlohmann::json to_json(const bench_result& r);

/// @brief The result as a table with a heading and notes, one line per row, ending in a newline.
std::string format_table(const bench_result& r);

/// @brief "1.23 G", "45.6 M", "789 k", "12.3": three significant figures with a metric prefix.
std::string rate_label(double per_second);

}  // namespace vram::measure
