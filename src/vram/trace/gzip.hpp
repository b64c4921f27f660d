#pragma once
// gzip through zlib: inflated whole (the binary format wants one buffer) or step by step into the caller's
// buffers (text_source, for the CSV parsers), and deflated whole for the writers.

#include <zlib.h>

#include <string>
#include <string_view>

namespace vram::detail {

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

  /// @brief Checks that the input consumed is within the input. @throws invariant_error.
  void validate() const;

 private:
  std::string_view in_;
  const std::string& path_;
  std::size_t in_pos_ = 0;
  std::size_t size_hint_ = 0;
  bool finished_ = false;
  z_stream zs_{};
};

}  // namespace vram::detail
