// text_source: pieces of whole lines for the CSV parsers. Design decisions:
//  - a piece is cut at the last '\n' of a buffer of at most max_line_bytes + 1 bytes; the unfinished line
//    is moved to the front and the buffer refilled behind it. The buffer starts at 64 KiB (a small file
//    costs little) and doubles while more text is wanted, up to that size; full there with no line break,
//    it holds one line longer than a trace may have, so it is handed out unfinished and the parser refuses
//    it, naming its line (line_cursor checks every line's length); should a parser not, the next call
//    throws. So the
//    memory a reader takes is bounded whatever the input (/dev/zero, a gzip of one endless line);
//  - peek() reads only until the first line ends or passes max_line_bytes;
//  - text already in memory is handed out in one piece, with no copy;
//  - the rows reserved from an estimate are capped (max_row_estimate): the size of a sparse 2 TiB file
//    says nothing about the events in it, and the vector grows past the cap as events really arrive.

#include "vram/trace/text_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "vram/core/error.hpp"

namespace vram::detail {

namespace {

constexpr std::size_t piece_size = text_source::max_line_bytes + 1;  // full of one line: a line too long
constexpr std::size_t first_buffer = std::size_t{64} << 10;

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

std::string text_source::long_line_problem() {
  return fmt::format("a line longer than {} bytes: not a trace (a trace's lines are under 100 bytes)",
                     max_line_bytes);
}

text_source::text_source(std::string_view bytes, const std::string& path) : path_(&path), input_size_(bytes.size()) {
  if (is_gzip(bytes)) {
    inflater_ = std::make_unique<gzip_inflater>(bytes, path);
    size_hint_ = inflater_->size_hint();
    buffer_.resize(first_buffer);
  } else {
    plain_ = bytes;
    size_hint_ = bytes.size();
  }
}

text_source::text_source(input_file& file, std::string start)
    : file_(&file), path_(&file.path()), buffer_(std::move(start)), input_size_(file.size()), size_hint_(file.size()) {
  have_ = buffer_.size();
  buffer_.resize(std::max(have_, first_buffer));
}

text_source::text_source(std::unique_ptr<gzip_inflater> inflater, std::string start)
    : inflater_(std::move(inflater)), path_(&inflater_->path()), buffer_(std::move(start)) {
  input_size_ = static_cast<std::size_t>(inflater_->input_size());
  size_hint_ = inflater_->size_hint();
  exhausted_ = inflater_->finished();
  have_ = buffer_.size();
  buffer_.resize(std::max(have_, first_buffer));
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

bool text_source::fill(std::size_t len) {
  if (exhausted_) return false;
  if (have_ == buffer_.size() && buffer_.size() < piece_size)  // double, up to the cap
    buffer_.resize(std::min(2 * buffer_.size(), piece_size));
  have_ += produce(buffer_.data() + have_, std::min(len, buffer_.size() - have_));
  return true;
}

void text_source::compact() {
  if (start_ == 0) return;
  std::memmove(buffer_.data(), buffer_.data() + start_, have_ - start_);
  have_ -= start_;
  start_ = 0;
}

std::string_view text_source::peek() {
  if (!inflater_ && !file_) return plain_done_ ? std::string_view{} : plain_;
  compact();
  for (;;) {
    const std::string_view held(buffer_.data(), have_);
    if (held.find('\n') != std::string_view::npos || held.size() > max_line_bytes ||
        !fill(max_line_bytes + 1 - held.size()))
      return held;
  }
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
  if (overlong_) throw input_error(fmt::format("{}: {}", *path_, long_line_problem()));
  if (!inflater_ && !file_) {
    if (plain_done_ || plain_.empty()) return false;
    plain_done_ = true;
    piece = plain_;
    return true;
  }
  compact();  // keep the unfinished last line, at the front
  for (;;) {
    if (have_ >= piece_size || exhausted_) {
      const std::string_view text(buffer_.data(), have_);
      const std::size_t nl = text.rfind('\n');
      if (nl != std::string_view::npos) {  // a full buffer: the whole lines in it
        piece = text.substr(0, nl + 1);
        start_ = nl + 1;
        return true;
      }
      if (exhausted_ && have_ == 0) return false;
      overlong_ = !exhausted_;  // one line fills the buffer: hand it out for the parser to refuse
      piece = text;
      start_ = have_;
      return true;
    }
    fill(piece_size);  // as much as the buffer takes
  }
}

}  // namespace vram::detail
