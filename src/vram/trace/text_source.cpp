// text_source: pieces of whole lines for the CSV parsers. Design decisions:
//  - a piece is cut at the last '\n' of a 1 MiB buffer; the unfinished line is moved to the front and the
//    buffer refilled behind it. A buffer that fills with no line break is a line of over 1 MiB: an error,
//    so the memory a reader takes is bounded whatever the input (/dev/zero, a gzip of one endless line);
//  - text already in memory is handed out in one piece, with no copy.

#include "vram/trace/text_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "vram/core/error.hpp"

namespace vram::detail {

namespace {

constexpr std::size_t piece_size = text_source::max_line_bytes;

std::size_t count_lines(std::string_view text) noexcept {
  std::size_t n = 0;
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    const void* nl = std::memchr(p, '\n', static_cast<std::size_t>(end - p));
    ++n;
    if (nl == nullptr) break;
    p = static_cast<const char*>(nl) + 1;
  }
  return n;
}

}  // namespace

text_source::text_source(std::string_view bytes, const std::string& path) : input_size_(bytes.size()), path_(path) {
  if (is_gzip(bytes)) {
    inflater_ = std::make_unique<gzip_inflater>(bytes, path);
    size_hint_ = inflater_->size_hint();
    buffer_.resize(piece_size);
  } else {
    plain_ = bytes;
    size_hint_ = bytes.size();
  }
}

text_source::text_source(input_file& file, std::string start)
    : file_(&file), buffer_(std::move(start)), input_size_(file.size()), size_hint_(file.size()), path_(file.path()) {
  have_ = buffer_.size();
  buffer_.resize(piece_size);  // pre: start holds less than a piece (read_trace passes 16 bytes)
}

std::size_t text_source::row_estimate(std::size_t typical_row_bytes) const {
  if (!inflater_ && !file_) return std::min(count_lines(plain_), max_row_estimate);
  std::size_t guess = size_hint_ / typical_row_bytes + 1;
  if (inflater_ && guess > input_size_) guess = input_size_;
  return std::min(guess, max_row_estimate);
}

std::size_t text_source::produce(char* out, std::size_t len) {
  if (inflater_) {
    const std::size_t n = inflater_->read(out, len);
    exhausted_ = inflater_->finished();
    return n;
  }
  const std::size_t n = file_->read(out, len);
  exhausted_ = n < len;
  return n;
}

void text_source::line_too_long() const {
  throw input_error(fmt::format("{}: a line longer than {} bytes: not a trace (a trace's lines are under 100 bytes)",
                                path_, max_line_bytes));
}

bool text_source::fill() {
  if (exhausted_) return false;
  // pre: start_ == 0 (peek() before the first piece; next() moves the unfinished line to the front), and the
  // buffer is max_line_bytes: full, it holds one line with no end.
  if (have_ == buffer_.size()) line_too_long();
  have_ += produce(buffer_.data() + have_, buffer_.size() - have_);
  return true;
}

std::string_view text_source::peek() {
  if (!inflater_ && !file_) return plain_done_ ? std::string_view{} : plain_;
  while (std::string_view(buffer_.data() + start_, have_ - start_).find('\n') == std::string_view::npos && fill()) {
  }
  return std::string_view(buffer_.data() + start_, have_ - start_);
}

void text_source::validate() const {
  if (inflater_ && file_) throw invariant_error("text_source: both a gzip stream and a file");
  if (start_ > have_ || have_ > buffer_.size())
    throw invariant_error(
        fmt::format("text_source: handed out {} > held {} or held > buffer {}", start_, have_, buffer_.size()));
  if (start_ > 0 && start_ < have_ && buffer_[start_ - 1] != '\n' && !exhausted_)
    throw invariant_error("text_source: a piece ended inside a line");
}

bool text_source::next(std::string_view& piece) {
#if VRAM_DEBUG_VALIDATE
  validate();
#endif
  if (!inflater_ && !file_) {
    if (plain_done_ || plain_.empty()) return false;
    plain_done_ = true;
    piece = plain_;
    return true;
  }
  if (start_ > 0) {  // keep the unfinished last line, at the front
    std::memmove(buffer_.data(), buffer_.data() + start_, have_ - start_);
    have_ -= start_;
    start_ = 0;
  }
  for (;;) {
    if (have_ == buffer_.size() || exhausted_) {
      const std::string_view text(buffer_.data(), have_);
      const std::size_t nl = text.rfind('\n');
      if (nl != std::string_view::npos) {
        piece = text.substr(0, nl + 1);
        start_ = nl + 1;
        return true;
      }
      if (exhausted_) {
        if (have_ == 0) return false;
        piece = text;
        start_ = have_;
        return true;
      }
    }
    fill();  // grows the buffer when one line fills it
  }
}

}  // namespace vram::detail
