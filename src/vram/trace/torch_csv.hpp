#pragma once
// PyTorch memory-history CSV (shared/traces/README.md): a header `time_us,action,addr,size,stream` and one
// row per allocator event, all numbers in decimal.

#include <string>
#include <string_view>
#include <vector>

#include "vram/trace/text_source.hpp"
#include "vram/trace/trace.hpp"

namespace vram::detail {

inline constexpr std::string_view torch_header = "time_us,action,addr,size,stream";

/// @brief Parses the text of a torch CSV, piece by piece. @p path names the file in errors.
/// @throws input_error "PATH:LINE: problem".
std::vector<trace_event> parse_torch_csv(text_source& src, const std::string& path);

/// @brief The torch CSV text of @p t, header included.
std::string format_torch_csv(const trace& t);

}  // namespace vram::detail
