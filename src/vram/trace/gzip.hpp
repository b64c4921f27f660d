#pragma once
// Whole-file input and output for the trace readers and writers, and gzip through zlib. A trace file is
// read into one buffer and inflated into another (sized from the gzip trailer, bounded by the deflate
// ratio), so the parsers run over contiguous memory with no per-row allocation.

#include <string>
#include <string_view>

namespace vram::detail {

/// @brief The whole file's bytes. @throws input_error "PATH: cannot open: reason" for a missing file.
std::string read_file_bytes(const std::string& path);

/// @brief Writes @p bytes to @p path, replacing it. @throws vram::error when the file cannot be written.
void write_file_bytes(const std::string& path, std::string_view bytes);

/// @brief True when @p bytes starts with the gzip magic (1f 8b).
bool is_gzip(std::string_view bytes) noexcept;

/// @brief Inflates one gzip file (several concatenated members are allowed).
/// @throws input_error "PATH: truncated gzip stream" or "PATH: corrupt gzip data: reason".
std::string gunzip(std::string_view bytes, const std::string& path);

/// @brief Compresses @p bytes as one gzip member.
std::string gzip(std::string_view bytes);

}  // namespace vram::detail
