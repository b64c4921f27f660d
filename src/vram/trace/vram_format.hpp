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

/// @brief Checks the 40-byte header at the start of @p bytes (magic, header CRC, version, flags, an event
/// count that fits the payload) and returns the payload size it announces. @throws input_error as below.
std::uint64_t check_vram_header(std::string_view bytes, const std::string& path);

/// @brief Decodes a vram-format file (already inflated). @p path names the file in errors.
/// @throws input_error "PATH: byte OFFSET: corrupt vram trace: problem" for truncated or corrupt files.
std::vector<trace_event> parse_vram_format(std::string_view bytes, const std::string& path);

/// @brief Encodes @p t. pre: times are non-negative and non-decreasing (write_trace checks).
std::string format_vram(const trace& t);

/// @brief Encodes events one at a time, each relative to the one before, as format_vram does: a writer
/// that appends to a file as events come (trace_recorder) and format_vram share it.
class vram_encoder {
 public:
  /// @brief Appends @p e's record to @p out. pre: e.time_us >= the previous event's.
  void append(const trace_event& e, std::string& out);

 private:
  trace_event prev_;
};

/// @brief The 40-byte header of a file of @p count events whose payload is @p payload_size bytes with
/// CRC-32 @p payload_crc.
std::string vram_header(std::uint64_t count, std::uint64_t payload_size, std::uint32_t payload_crc);

/// @brief zlib's CRC-32 of @p bytes continued from @p crc (0 to start).
std::uint32_t crc32_extend(std::uint32_t crc, std::string_view bytes) noexcept;

}  // namespace vram::detail
