#pragma once
// Whole-file input and output for the trace readers and writers, and gzip through zlib, either inflated
// whole (the binary format wants one buffer) or in pieces of whole lines (the CSV parsers, so a 43 MB
// text never needs to exist in memory at once).

#include <zlib.h>

#include <memory>
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

/// @brief Inflates a gzip file step by step into buffers the caller owns.
class gzip_inflater {
 public:
  /// pre: @p bytes outlives the inflater.
  gzip_inflater(std::string_view bytes, const std::string& path);
  gzip_inflater(const gzip_inflater&) = delete;
  gzip_inflater& operator=(const gzip_inflater&) = delete;
  ~gzip_inflater();

  /// @brief Inflates into [out, out + len); returns the bytes written (fewer than len only at the end).
  /// @throws input_error for truncated or corrupt data.
  std::size_t read(char* out, std::size_t len);
  bool finished() const noexcept { return finished_; }
  /// @brief The inflated size the gzip trailer announces, bounded by what the input can expand to.
  std::size_t size_hint() const noexcept { return size_hint_; }

 private:
  std::string_view in_;
  const std::string& path_;
  std::size_t in_pos_ = 0;
  std::size_t size_hint_ = 0;
  bool finished_ = false;
  z_stream zs_{};
};

/// @brief The text of a trace file in pieces, each ending with a whole line (the last may lack its '\n'):
/// the file itself when plain, or inflated 1 MiB at a time when gzip.
class text_source {
 public:
  /// pre: @p bytes outlives the source.
  text_source(std::string_view bytes, const std::string& path);

  /// @brief The next piece; false when the text is done. A piece stays valid until the next call.
  bool next(std::string_view& piece);
  /// @brief The start of the text without consuming it (at least the first line, unless the text is shorter).
  std::string_view peek();
  /// @brief The text's size, or an estimate of it for gzip.
  std::size_t size_hint() const noexcept { return size_hint_; }
  bool is_gzip() const noexcept { return inflater_ != nullptr; }
  /// @brief The size of the file's bytes (compressed, for gzip).
  std::size_t input_size() const noexcept { return input_size_; }

 private:
  bool fill();

  std::string_view plain_;
  bool plain_done_ = false;
  std::unique_ptr<gzip_inflater> inflater_;
  std::string buffer_;
  std::size_t have_ = 0;   // bytes of buffer_ holding text
  std::size_t start_ = 0;  // bytes of buffer_ already handed out
  std::size_t size_hint_ = 0;
  std::size_t input_size_ = 0;
};

}  // namespace vram::detail
