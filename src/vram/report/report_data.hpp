#pragma once
// What `vram report` shows, worked out in C++ and handed to the page as JSON: for each trace, every
// policy's replay on a simulated device (the table `vram replay` prints), live and reserved bytes over time
// reduced to buckets that keep every peak (envelope.hpp), the allocators' state at chosen moments drawn to
// scale (memory_map.hpp), a sentence for each first failure, `fit` per policy, and vram's trade-off between
// reserved memory and driver time over its settings. The keys are listed in docs/report.md.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vram/device/sim_device.hpp"
#include "vram/trace/trace.hpp"

namespace vram {

struct report_options {
  std::vector<std::string> policies = {"vram", "torch-native"};  // policy specs
  sim_device_options device;          // the simulated device every replay runs on
  std::size_t points = 32768;         // buckets per series over the whole trace (the page draws a few thousand a view)
  std::size_t moments = 24;           // states drawn at evenly spaced times, besides peaks and failures
  std::vector<double> at_seconds;     // more moments, in seconds from the trace's first row
  std::size_t map_cells = 16384;      // cells of the widest state drawn; sets the bytes per cell
  bool fit = true;                    // `vram fit` per policy (a binary search of replays)
  bool curve = true;                  // vram over a grid of its settings
  std::function<void(const std::string&)> progress;  // what it is doing, for a progress line
};

/// @brief A series as its first value and then each value's difference from the one before: a page of
/// 32,768 buckets a series stays small where memory holds still. delta_decode undoes it.
nlohmann::json delta_encode(const std::vector<std::size_t>& values);
std::vector<std::size_t> delta_decode(const nlohmann::json& deltas);

/// @brief The settings of vram's pool the trade-off curve replays ("" for the defaults).
std::vector<std::string> curve_settings();

/// @brief One trace's part of the report. @throws usage_error for an unknown policy.
nlohmann::json report_trace(const trace& t, const report_options& options);

/// @brief The row of a trace's program (alloc or free_requested) in force at @p seconds from its first row:
/// the last such row at or before it, else the first. @p t must have a program row.
std::size_t program_row_at(const trace& t, double seconds);

/// @brief The sentence a person needs at a first failure. @p state is the failing policy's state entry and
/// @p others the other policies' entries at the same moment (as report_trace writes them), each with
/// "policy", "failed_before" (true when that policy had failed at or before this row) and the byte figures.
std::string failure_sentence(const nlohmann::json& failure, const nlohmann::json& state,
                             const std::vector<nlohmann::json>& others);

}  // namespace vram
