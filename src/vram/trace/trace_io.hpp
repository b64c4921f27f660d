#pragma once
// Reading and writing traces in the formats vram knows:
//  - torch:   PyTorch memory-history CSV, `time_us,action,addr,size,stream` (shared/traces/README.md), plain or gzip;
//  - rmm:     RMM logging_resource_adaptor CSV, `Thread,Time,Action,Pointer,Size,Stream`, plain or gzip;
//  - vram:    vram's own format (docs/trace-format.md);
//  - and, read only: PyTorch's memory snapshot, the pickle torch.cuda.memory._dump_snapshot writes (plain or
//    gzip), one trace per device (torch_snapshot.hpp).
// Every reader throws input_error naming the file, the line and the problem; none crashes or hangs on bad input.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vram/trace/trace.hpp"

namespace vram {

enum class trace_format { torch, rmm, vram };

/// @brief Parses a format name ("torch", "rmm", "vram"). @throws usage_error for another.
trace_format parse_trace_format(std::string_view name);
std::string_view to_string(trace_format f) noexcept;
/// @brief The format a file's name asks for: PyTorch's CSV for ".csv" and ".csv.gz" (in any case), vram's for any
/// other (an RMM log is written only when asked for by name).
trace_format format_for_name(std::string_view path) noexcept;

namespace detail {
/// @brief Whether @p s ends with @p suffix in any case (".CSV.GZ" is a gzip CSV as ".csv.gz" is).
bool ends_with_any_case(std::string_view s, std::string_view suffix) noexcept;
}  // namespace detail

struct read_options {
  /// @brief Of a snapshot with several devices, only this one; every device when unset.
  std::optional<int> device_index;
};

/// @brief Reads the traces of a file, detecting its format and compression from its first bytes: one trace,
/// or one per device of a PyTorch snapshot ("NAME.devN" when it holds several).
/// @throws input_error for a missing, empty or malformed file, or a device_index the file has no trace for.
std::vector<trace> read_traces(const std::string& path, const read_options& options = {});

/// @brief Reads a file that holds one trace (see read_traces).
/// @throws input_error as read_traces, and for a snapshot with several devices (naming them).
trace read_trace(const std::string& path, const read_options& options = {});

/// @brief The rows write_trace writes of @p t in format @p f: all of its events, but in an RMM log only its
/// allocations, frees and failed allocations.
std::size_t rows_written(const trace& t, trace_format f);

/// @brief Of the rows write_trace writes of @p t in format @p f, how many a reader gets back with another time_us:
/// none for torch and vram; in an RMM log, whose Time is a time of day, those detail::rmm_retimed_rows counts.
std::size_t rows_retimed(const trace& t, trace_format f);

/// @brief Writes @p t in format @p f; gzip-compressed when @p path ends in ".gz" (in any case).
void write_trace(const std::string& path, const trace& t, trace_format f);

}  // namespace vram
