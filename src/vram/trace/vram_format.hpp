#pragma once
// vram's own trace format (docs/trace-format.md): a 40-byte header (magic, version, event count, payload
// size, CRC-32s) and a payload of one variable-length record per event, deltas and varints, so a trace
// reads at memory speed. The whole file may be gzip-compressed on top.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vram/trace/trace.hpp"

namespace vram::detail {

inline constexpr std::string_view vram_magic = "\x89VRAMTR\n";
inline constexpr std::uint32_t vram_format_version = 1;
inline constexpr std::size_t vram_header_size = 40;

/// @brief True when @p bytes starts with the vram magic.
bool is_vram_format(std::string_view bytes) noexcept;

/// @brief Decodes a vram-format file (already inflated). @p path names the file in errors.
/// @throws input_error "PATH: byte OFFSET: corrupt vram trace: problem" for truncated or corrupt files.
std::vector<trace_event> parse_vram_format(std::string_view bytes, const std::string& path);

/// @brief Encodes @p t. pre: times are non-negative and non-decreasing (write_trace checks).
std::string format_vram(const trace& t);

}  // namespace vram::detail
