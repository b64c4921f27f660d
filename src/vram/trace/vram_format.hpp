#pragma once
// vram's own trace format (docs/trace-format.md): a 40-byte header (magic, version, event count, payload
// size, CRC-32s) and a payload of one variable-length record per event, deltas and varints, so a trace
// reads at memory speed. The whole file may be gzip-compressed on top.

#include <cstdint>
#include <functional>
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

/// @brief What a checked header announces.
struct vram_header_fields {
  std::uint64_t count = 0;
  std::uint64_t payload_size = 0;
  std::uint32_t payload_crc = 0;
};

/// @brief Checks the 40-byte header at the start of @p bytes on its own: magic, header CRC, version, flags,
/// and an event count that fits the payload size both ways (records take 2 to 41 bytes).
/// @throws input_error "PATH: byte OFFSET: corrupt vram trace: problem".
vram_header_fields check_vram_header(std::string_view bytes, const std::string& path);

/// @brief Decodes a vram-format file (already inflated). @p path names the file in errors.
/// @throws input_error "PATH: byte OFFSET: corrupt vram trace: problem" for truncated or corrupt files.
std::vector<trace_event> parse_vram_format(std::string_view bytes, const std::string& path);

/// @brief Fills [out, out + len) with the next bytes of a stream; returns fewer than len only at its end.
using byte_reader = std::function<std::size_t(char* out, std::size_t len)>;

/// @brief Reads a vram-format file from a stream (a file, or a gzip inflater): the 40-byte header first,
/// checked before anything else is read (magic, header CRC, version, flags, and an event count that fits
/// the payload size both ways), then the payload, never more than the header's payload size + 1 byte.
/// @param start the first bytes, already read from the stream.
/// @param exact_size the stream's size when known (a plain regular file), else 0: the payload must fill it,
/// but for one case: a file that goes on past the payload its header gives is what a recording leaves when it
/// is cut off between appending events and rewriting its header (kill -9, a file-size limit). Its header's
/// payload is read, checked by its CRC, and @p note says how many bytes were left out.
/// @param compressed_size for a gzip stream, the compressed size when known, else 0: the payload must be
/// one deflate can make of it (about 1032 bytes a compressed byte).
/// @throws input_error as parse_vram_format, and "... the data goes on past the N-byte payload the header
/// gives" for a stream (gzip, a pipe) longer than its header says.
std::vector<trace_event> read_vram_format(std::string start, const byte_reader& read, std::uint64_t exact_size,
                                          std::uint64_t compressed_size, const std::string& path,
                                          std::string* note = nullptr);

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
