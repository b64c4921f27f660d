#pragma once
// RMM's logging_resource_adaptor CSV: a header `Thread,Time,Action,Pointer,Size,Stream` and one row per
// allocate / free / failed allocate. Time is the wall-clock time of day `HH:MM:SS.ffffff`; Pointer and
// Stream are hexadecimal (with "0x" from older RMM, without from newer).

#include <string>
#include <string_view>
#include <vector>

#include "vram/trace/text_source.hpp"
#include "vram/trace/trace.hpp"

namespace vram::detail {

inline constexpr std::string_view rmm_header = "Thread,Time,Action,Pointer,Size,Stream";

/// @brief Parses the text of an RMM log, piece by piece. Maps allocate -> alloc, free -> free_requested,
/// "allocate failure" -> oom; Time becomes microseconds from the first midnight.
/// @throws input_error "PATH:LINE: problem".
std::vector<trace_event> parse_rmm_csv(text_source& src, const std::string& path);

/// @brief Whether an RMM log has a row for @p a: allocations, frees and failed allocations only.
constexpr bool rmm_logs(trace_action a) noexcept {
  return a == trace_action::alloc || a == trace_action::free_requested || a == trace_action::oom;
}

/// @brief Of the rows format_rmm_csv writes of @p t, how many read back with another time_us: the Time column
/// holds only a time of day, so a trace whose clock is not from its first midnight (PyTorch's, from the epoch)
/// reads back shifted, and a step of 12 hours or more between rows is lost. 0 when every time comes back.
std::size_t rmm_retimed_rows(const trace& t);

/// @brief The RMM log text of @p t. Rows RMM does not log (free_completed, segment rows, snapshots) are left
/// out; time_us is written as the time of day it falls on.
std::string format_rmm_csv(const trace& t);

}  // namespace vram::detail
