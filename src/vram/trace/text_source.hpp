#pragma once
// The text of a CSV trace in pieces of whole lines, whatever holds it: bytes in memory, gzip inflated
// 1 MiB at a time (from memory or from a file), or a plain file read 1 MiB at a time. The CSV parsers run
// over each piece with no copy and no per-row allocation, and never need the whole text in memory. What
// it holds is bounded whatever the input: no trace line is longer than max_line_bytes, so a "line" that
// fills the buffer is handed out as it is, for the parser to refuse with its line number.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "vram/trace/file_io.hpp"
#include "vram/trace/gzip.hpp"

namespace vram::detail {

class text_source {
 public:
  /// @brief The longest line handed out whole (1 MiB; a trace's lines are under 100 bytes). A longer one is
  /// an input_error, so /dev/zero or a gzip bomb of one endless line costs at most this much memory.
  static constexpr std::size_t max_line_bytes = std::size_t{1} << 20;
  /// @brief The most rows row_estimate() gives, whatever the sizes say (a 2 TiB sparse file).
  static constexpr std::size_t max_row_estimate = std::size_t{1} << 21;
  /// @brief What is wrong with a line longer than max_line_bytes: "a line longer than 1048576 bytes: not a
  /// trace (...)"; the CSV readers put "PATH:LINE: " before it.
  static std::string long_line_problem();

  /// @brief Text in memory, plain or gzip (inflated as it goes). pre: @p bytes and @p path outlive the source.
  text_source(std::string_view bytes, const std::string& path);
  /// @brief A plain text file; @p start holds the bytes already read from it. pre: @p file outlives the source.
  text_source(input_file& file, std::string start);
  /// @brief Text inflated by @p inflater (from memory or a file); @p start holds the bytes already inflated.
  text_source(std::unique_ptr<gzip_inflater> inflater, std::string start);

  /// @brief The next piece, ending with a whole line (the last may lack its '\n'); false when the text is
  /// done. A piece stays valid until the next call. A line that fills the whole buffer (longer than
  /// max_line_bytes) is handed out unfinished, for the parser to refuse; a call after it throws.
  /// @throws input_error "PATH: a line longer than 1048576 bytes: not a trace (...)" after such a piece.
  bool next(std::string_view& piece);
  /// @brief The start of the text without consuming it: at least the first line, unless the text is shorter
  /// or the line is longer than max_line_bytes (then at least max_line_bytes + 1 bytes of it, no more than
  /// needed: a file of one endless line costs 1 MiB here).
  std::string_view peek();
  /// @brief Rows to reserve, at most max_row_estimate: the lines of text in memory; the size over
  /// @p typical_row_bytes for a file, or for gzip the announced size over it, capped by the compressed size
  /// (a corrupt trailer cannot reserve gigabytes).
  std::size_t row_estimate(std::size_t typical_row_bytes) const;
  /// @brief The file or name the text comes from, for errors.
  const std::string& path() const noexcept { return *path_; }

  /// @brief Checks handed-out <= held <= buffer size, and one source of text. @throws invariant_error.
  void validate() const;

 private:
  std::size_t produce(char* out, std::size_t len);  // from the inflater or the file
  bool fill(std::size_t len);  // up to len more bytes, growing a full buffer; false when there are no more
  void compact();                                   // moves the unfinished line to the front

  std::string_view plain_;
  bool plain_done_ = false;
  std::unique_ptr<gzip_inflater> inflater_;
  input_file* file_ = nullptr;
  const std::string* path_;
  bool exhausted_ = false;  // the inflater or the file has nothing more
  bool overlong_ = false;   // a piece that was one unfinished line of the whole buffer was handed out
  std::string buffer_;
  std::size_t have_ = 0;   // bytes of buffer_ holding text
  std::size_t start_ = 0;  // bytes of buffer_ already handed out
  std::size_t input_size_ = 0;
  std::size_t size_hint_ = 0;
};

}  // namespace vram::detail
