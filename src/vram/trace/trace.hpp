#pragma once
// An allocation trace in memory: one row per allocator event, in time order. Rows come from PyTorch's
// memory history CSV, a PyTorch memory snapshot, RMM's logging_resource_adaptor CSV, vram's own format, or
// the synthetic workloads. A free matches the latest alloc at its address.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vram {

enum class trace_action : std::uint8_t {
  alloc,           // the program asked for size bytes and got addr
  free_requested,  // the program released the block at addr
  free_completed,  // the allocator may reuse it (after stream events completed)
  segment_alloc,   // the recorded allocator took a segment from the driver
  segment_free,    // ... and gave one back
  segment_map,     // expandable segments: pages mapped
  segment_unmap,   // ... and unmapped
  oom,             // the recorded allocator ran out of memory
  snapshot,        // a snapshot was taken
};

/// @brief The action's name as written in the PyTorch-style CSV ("alloc", "free_requested", ...).
std::string_view to_string(trace_action a) noexcept;

struct trace_event {
  std::int64_t time_us = 0;
  std::uint64_t addr = 0;
  std::uint64_t size = 0;
  std::uint64_t stream = 0;
  trace_action action = trace_action::alloc;
};

struct trace {
  std::string name;  // file name without folders and extensions, or the workload's name
  std::vector<trace_event> events;
  std::vector<std::string> notes;  // what the reader inferred (a snapshot's missing start), for the output

  /// @brief Span of the trace's own timestamps, in seconds (0 for fewer than two events).
  double seconds() const noexcept {
    return events.size() < 2 ? 0.0 : static_cast<double>(events.back().time_us - events.front().time_us) * 1e-6;
  }
};

}  // namespace vram
