#pragma once
// gzip through zlib: inflated step by step into the caller's buffers, from bytes in memory or from a file
// read in pieces (text_source for the CSV parsers, read_vram_format for vram's own format), and deflated
// whole for the writers. A reader asks for as many inflated bytes as it has checked it needs, so a small
// file that inflates to gigabytes costs only what is asked.

#include <zlib.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "vram/trace/file_io.hpp"

namespace vram::detail {

/// @brief The most bytes deflate can expand one input byte to (258-byte matches of 2 bits, about 1032:1).
inline constexpr std::uint64_t max_deflate_ratio = 1032;

/// @brief True when @p bytes starts with the gzip magic (1f 8b).
bool is_gzip(std::string_view bytes) noexcept;

/// @brief Compresses @p bytes as one gzip member.
std::string gzip(std::string_view bytes);

/// @brief Inflates a gzip file step by step into buffers the caller owns.
class gzip_inflater {
 public:
  /// @brief Inflates bytes in memory. pre: @p bytes and @p path outlive the inflater.
  gzip_inflater(std::string_view bytes, const std::string& path);
  /// @brief Inflates a file read 256 KiB at a time; @p start holds the bytes already read from it.
  /// pre: @p file outlives the inflater.
  gzip_inflater(input_file& file, std::string start);
  gzip_inflater(const gzip_inflater&) = delete;
  gzip_inflater& operator=(const gzip_inflater&) = delete;
  ~gzip_inflater();

  /// @brief Inflates into [out, out + len); returns the bytes written (fewer than len only at the end).
  /// @throws input_error for truncated or corrupt data.
  std::size_t read(char* out, std::size_t len);
  bool finished() const noexcept { return finished_; }
  /// @brief The inflated size the gzip trailer announces, bounded by what the input can expand to.
  std::size_t size_hint() const noexcept { return size_hint_; }
  /// @brief The compressed size: of the bytes in memory, or of a regular file; 0 when unknown (a pipe).
  std::uint64_t input_size() const noexcept { return input_size_; }
  const std::string& path() const noexcept { return path_; }

  /// @brief Checks that the input consumed is within the input held. @throws invariant_error.
  void validate() const;

 private:
  bool more_input();     // reads the file's next piece behind the unread input; false at its end
  void end_of_member();  // after one member: another member, zero padding, or garbage

  std::string_view in_;  // the input held: all the bytes in memory, or file_buffer_
  std::size_t in_pos_ = 0;
  input_file* file_ = nullptr;
  std::string file_buffer_;
  bool file_done_ = false;
  const std::string& path_;
  std::uint64_t input_size_ = 0;
  std::size_t size_hint_ = 0;
  bool finished_ = false;
  z_stream zs_{};
};

}  // namespace vram::detail
