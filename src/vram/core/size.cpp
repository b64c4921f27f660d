// Parsing and printing of byte sizes.
#include "vram/core/size.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cctype>
#include <cmath>
#include <limits>
#include <utility>

#include "vram/core/error.hpp"

namespace vram {
namespace {

/// The number a size or a duration starts with, and the text after it; @p bad makes the error to throw.
template <class Bad>
std::pair<double, std::string_view> leading_number(std::string_view text, const Bad& bad) {
  std::size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) ++digits;
  if (digits == 0) throw bad(text.empty() || text[0] != '-' ? "no number" : "negative");
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, value);
  if (ec != std::errc{} || end != text.data() + digits) throw bad("not a number");
  return {value, text.substr(digits)};
}

}  // namespace

std::size_t parse_size(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return usage_error(fmt::format("bad size '{}': {} (write e.g. 512, 64MiB, 80GiB)", text, why));
  };
  auto [value, unit] = leading_number(text, bad);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  static constexpr std::array<std::pair<std::string_view, double>, 13> units{{
      {"", 1.0}, {"B", 1.0}, {"K", 1024.0}, {"KiB", 1024.0}, {"KB", 1e3}, {"M", 1048576.0}, {"MiB", 1048576.0},
      {"MB", 1e6}, {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9}, {"TiB", 1099511627776.0}, {"TB", 1e12}}};
  for (const auto& [name, factor] : units) {
    if (unit == name) {
      const double bytes = value * factor;
      if (!(bytes < static_cast<double>(std::numeric_limits<std::size_t>::max()))) throw bad("too large");
      if (bytes != std::floor(bytes)) throw bad("not a whole number of bytes");
      return static_cast<std::size_t>(bytes);
    }
  }
  throw bad("unknown unit '" + std::string(unit) + "'");
}

std::int64_t parse_duration_ns(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return usage_error(fmt::format("bad duration '{}': {} (write e.g. 250us, 5ms, 1.5s)", text, why));
  };
  const auto [value, unit] = leading_number(text, bad);
  if (unit.empty() && value == 0) return 0;  // no time is the same in every unit
  static constexpr std::array<std::pair<std::string_view, double>, 4> units{
      {{"ns", 1.0}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}}};
  for (const auto& [name, factor] : units) {
    if (unit == name) {
      const double ns = std::round(value * factor);
      if (!(ns < static_cast<double>(std::numeric_limits<std::int64_t>::max()))) throw bad("too long");
      return static_cast<std::int64_t>(ns);
    }
  }
  throw bad(unit.empty() ? "no unit" : "unknown unit '" + std::string(unit) + "'");
}

std::string format_bytes(std::size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (b < 1048576.0) return fmt::format("{:.2f} KiB", b / 1024.0);
  if (b < 1073741824.0) return fmt::format("{:.2f} MiB", b / 1048576.0);
  if (b < 1099511627776.0) return fmt::format("{:.2f} GiB", b / 1073741824.0);
  if (b < 1125899906842624.0) return fmt::format("{:.2f} TiB", b / 1099511627776.0);
  if (b < 1152921504606846976.0) return fmt::format("{:.2f} PiB", b / 1125899906842624.0);
  return fmt::format("{:.2f} EiB", b / 1152921504606846976.0);
}

std::string format_duration(double seconds) {
  if (seconds < 120) return fmt::format("{:.3f} s", seconds);
  if (seconds < 7200) return fmt::format("{:.1f} min", seconds / 60);
  return fmt::format("{:.1f} h", seconds / 3600);
}

}  // namespace vram
