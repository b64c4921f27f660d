#pragma once
// Reading and writing traces in the formats vram knows:
//  - torch:   PyTorch memory-history CSV, `time_us,action,addr,size,stream` (shared/traces/README.md), plain or gzip;
//  - rmm:     RMM logging_resource_adaptor CSV, `Thread,Time,Action,Pointer,Size,Stream`, plain or gzip;
//  - vram:    vram's own format (docs/trace-format.md).
// Every reader throws input_error naming the file, the line and the problem; none crashes or hangs on bad input.

#include <string>
#include <string_view>

#include "vram/trace/trace.hpp"

namespace vram {

enum class trace_format { torch, rmm, vram };

/// @brief Parses a format name ("torch", "rmm", "vram"). @throws usage_error for another.
trace_format parse_trace_format(std::string_view name);
std::string_view to_string(trace_format f) noexcept;

/// @brief Reads a trace, detecting its format and compression from its first bytes.
/// @throws input_error for a missing, empty or malformed file.
trace read_trace(const std::string& path);

/// @brief Writes @p t in format @p f; gzip-compressed when @p path ends in ".gz".
void write_trace(const std::string& path, const trace& t, trace_format f);

}  // namespace vram
