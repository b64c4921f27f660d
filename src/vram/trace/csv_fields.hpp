#pragma once
// The pieces the CSV readers share: a cursor over the lines of one in-memory text that knows its line
// number and refuses a line longer than any trace has, and number parsing with std::from_chars that names
// the problem (empty, negative, not a number, overflowing). The fast path of each parser calls from_chars
// directly; these helpers also build the error message when a field fails, so every error reads
// "FILE:LINE: problem".

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "vram/core/error.hpp"
#include "vram/trace/text_source.hpp"

namespace vram::detail {

/// @brief Text quoted for an error message: at most 40 characters, control bytes shown as '?'.
inline std::string quote_for_error(std::string_view s) {
  std::string out = "'";
  const std::size_t n = s.size() < 40 ? s.size() : 40;
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  }
  if (s.size() > n) out += "...";
  out += '\'';
  return out;
}

/// @brief Walks the lines of a text given in pieces of whole lines, dropping '\r' before '\n'. Keeps the
/// 1-based line number across pieces for errors. Every line a parser reads goes through next(), which
/// refuses one longer than text_source::max_line_bytes (text_source hands out such a line unfinished).
class line_cursor {
 public:
  explicit line_cursor(const std::string& path) noexcept : path_(path) {}

  /// @brief Starts on the next piece of text; line numbers go on from the last piece.
  void reset(std::string_view piece) noexcept {
    p_ = piece.data();
    end_ = piece.data() + piece.size();
  }

  /// @brief Moves to the next line; false at the end of the piece.
  /// @throws input_error "PATH:LINE: a line longer than 1048576 bytes: not a trace (...)".
  bool next(std::string_view& line) {
    if (p_ >= end_) return false;
    const auto* nl = static_cast<const char*>(std::memchr(p_, '\n', static_cast<std::size_t>(end_ - p_)));
    const char* stop = nl != nullptr ? nl : end_;
    if (static_cast<std::size_t>(stop - p_) > text_source::max_line_bytes) {
      ++line_;
      fail(text_source::long_line_problem());
    }
    const char* last = stop;
    if (last > p_ && last[-1] == '\r') --last;
    line = std::string_view(p_, static_cast<std::size_t>(last - p_));
    p_ = nl != nullptr ? nl + 1 : end_;
    ++line_;
    return true;
  }

  /// @brief Records that one line was read by other means and the next starts at @p next.
  void advance_to(const char* next) noexcept {
    p_ = next;
    ++line_;
  }
  /// @brief Moves to @p at (the start of a line) without counting a line.
  void seek(const char* at) noexcept { p_ = at; }
  /// @brief Where the next line starts.
  const char* position() const noexcept { return p_; }

  std::size_t line_number() const noexcept { return line_; }
  const std::string& path() const noexcept { return path_; }

  /// @brief Throws input_error "PATH:LINE: problem" for the current line.
  [[noreturn]] void fail(std::string_view problem) const {
    throw input_error(fmt::format("{}:{}: {}", path_, line_ == 0 ? 1 : line_, problem));
  }

 private:
  const char* p_ = nullptr;
  const char* end_ = nullptr;
  const std::string& path_;
  std::size_t line_ = 0;
};

/// @brief Splits @p rest at its first ',' (the whole of it when there is none).
inline std::string_view take_field(std::string_view& rest) noexcept {
  const std::size_t comma = rest.find(',');
  const std::string_view field = rest.substr(0, comma);
  rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  return field;
}

/// @brief Number of comma-separated fields in @p line.
inline std::size_t count_fields(std::string_view line) noexcept {
  std::size_t n = 1;
  for (const char c : line) n += c == ',';
  return n;
}

/// @brief Why @p field is not a decimal unsigned 64-bit number (empty when it is one).
inline std::string decimal_problem(std::string_view field, std::string_view column) {
  if (field.empty()) return fmt::format("empty {}", column);
  if (field.front() == '-') return fmt::format("negative {} {}", column, quote_for_error(field));
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec == std::errc::result_out_of_range)
    return fmt::format("{} {} overflows 64 bits", column, quote_for_error(field));
  if (ec != std::errc{} || ptr != field.data() + field.size())
    return fmt::format("{} {} is not a number", column, quote_for_error(field));
  return {};
}

/// @brief Parses a whole field as a decimal unsigned number, or fails the cursor's line naming @p column.
inline std::uint64_t parse_decimal(std::string_view field, std::string_view column, const line_cursor& at) {
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec == std::errc{} && ptr == field.data() + field.size() && !field.empty()) return v;
  at.fail(decimal_problem(field, column));
}

/// @brief As parse_decimal, but the value must fit a signed 64-bit integer (timestamps).
inline std::int64_t parse_decimal_i64(std::string_view field, std::string_view column, const line_cursor& at) {
  const std::uint64_t v = parse_decimal(field, column, at);
  if (v > static_cast<std::uint64_t>(INT64_MAX))
    at.fail(fmt::format("{} {} overflows 63 bits", column, quote_for_error(field)));
  return static_cast<std::int64_t>(v);
}

}  // namespace vram::detail
