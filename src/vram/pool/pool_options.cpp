// Parsing of the pool's settings from the environment and from policy specs.
#include "vram/pool/pool_options.hpp"

#include <array>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"

namespace vram {

namespace detail {

// A row of the table: its name, its variable, and how a value is read into the options. Errors carry no
// name: the caller puts the setting's or the variable's name before them (row_error).
struct option_row {
  std::string_view name;
  std::string_view env;
  void (*set)(pool_options&, std::string_view value);
};

/// A number in [lo, hi], finite: "1e300" for a window in milliseconds, "nan" and "inf" are refused.
double parse_number(std::string_view v, double lo, double hi) {
  double d = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec != std::errc{} || end != v.data() + v.size() || !std::isfinite(d))
    throw usage_error(fmt::format("'{}': want a number from {} to {}", v, lo, hi));
  if (d < lo || d > hi) throw usage_error(fmt::format("'{}' is out of range: want a number from {} to {}", v, lo, hi));
  return d;
}

/// A whole number in [0, hi].
std::size_t parse_count(std::string_view v, std::size_t hi) {
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || end != v.data() + v.size() || v.empty() || n > hi)
    throw usage_error(fmt::format("'{}': want a whole number from 0 to {}", v, hi));
  return n;
}

/// A span of time in milliseconds from 0 to hi: a bare number is milliseconds ("2.5"); with a unit, any that
/// parse_duration_ns takes ("10ms", "500us", "1s").
double parse_window_ms(std::string_view v, double hi) {
  if (v.empty() || !std::isalpha(static_cast<unsigned char>(v.back()))) {
    try {
      return parse_number(v, 0, hi);
    } catch (const usage_error&) {
      throw usage_error(fmt::format("'{}': want milliseconds from 0 to {}, or a time with its unit (10ms, 500us)", v, hi));
    }
  }
  const double ms = static_cast<double>(parse_duration_ns(v)) / 1e6;  // refuses a negative or malformed one
  if (ms > hi) throw usage_error(fmt::format("'{}' is out of range: want at most {} ms", v, hi));
  return ms;
}

bool parse_bool(std::string_view v) {
  if (v == "1" || v == "true" || v == "on") return true;
  if (v == "0" || v == "false" || v == "off") return false;
  throw usage_error(fmt::format("'{}': want 1 or 0", v));
}

// Bounds: a cached share above 1000x what is in use, a window of more than an hour, or a reserve ratio
// above 1000x the peak is no setting anyone means; each bound also keeps the arithmetic on it finite.
constexpr double max_ratio = 1000;
constexpr double max_window_ms = 3'600'000;

// A block made of more than 1024 handles of its own is no setting anyone means.
constexpr std::size_t max_block_handles = 1024;

constexpr std::array<option_row, 14> option_table{{
    {"max_cached_ratio", "VRAM_MAX_CACHED_RATIO", [](pool_options& o, std::string_view v) { o.max_cached_ratio = parse_number(v, 0, max_ratio); }},
    {"max_handle", "VRAM_MAX_HANDLE", [](pool_options& o, std::string_view v) { o.max_handle_bytes = parse_size(v); }},
    {"small_handle", "VRAM_SMALL_HANDLE", [](pool_options& o, std::string_view v) { o.small_handle_bytes = parse_size(v); }},
    {"block_handles", "VRAM_BLOCK_HANDLES", [](pool_options& o, std::string_view v) { o.block_handles = parse_count(v, max_block_handles); }},
    {"burst_bytes", "VRAM_BURST_BYTES", [](pool_options& o, std::string_view v) { o.burst_bytes = parse_size(v); }},
    {"burst_window", "VRAM_BURST_WINDOW", [](pool_options& o, std::string_view v) { o.burst_window_ms = parse_window_ms(v, max_window_ms); }},
    {"spare_slack", "VRAM_SPARE_SLACK", [](pool_options& o, std::string_view v) { o.spare_slack_bytes = parse_size(v); }},
    {"holes_below_peak", "VRAM_HOLES_BELOW_PEAK", [](pool_options& o, std::string_view v) { o.holes_below_peak = parse_bool(v); }},
    {"aliasing", "VRAM_ALIASING", [](pool_options& o, std::string_view v) { o.aliasing = parse_bool(v); }},
    {"reserve_ratio", "VRAM_RESERVE_RATIO", [](pool_options& o, std::string_view v) { o.reserve_ratio = parse_number(v, 0, max_ratio); }},
    {"limit", "VRAM_LIMIT", [](pool_options& o, std::string_view v) { o.limit = parse_size(v); }},
    {"thread_cache", "VRAM_THREAD_CACHE", [](pool_options& o, std::string_view v) { o.thread_cache = parse_bool(v); }},
    {"thread_cache_bytes", "VRAM_THREAD_CACHE_BYTES", [](pool_options& o, std::string_view v) { o.thread_cache_bytes = parse_size(v); }},
    {"membarrier", "VRAM_MEMBARRIER", [](pool_options& o, std::string_view v) { o.membarrier = parse_bool(v); }},
}};

/// Applies @p value through @p row; a bad value's error names @p label (the setting or the variable).
void apply(const option_row& row, pool_options& o, std::string_view value, std::string_view label) {
  try {
    row.set(o, value);
  } catch (const usage_error& e) {
    throw usage_error(fmt::format("{}: {}", label, e.what()));
  }
}

}  // namespace detail

pool_options pool_options::from_environment() {
  pool_options o;
  for (const auto& row : detail::option_table)
    if (const char* v = std::getenv(std::string(row.env).c_str()); v != nullptr && *v != '\0')
      detail::apply(row, o, v, fmt::format("environment variable {}", row.env));
  return o;
}

std::vector<std::string> pool_options::environment_settings() {
  std::vector<std::string> set;
  for (const auto& row : detail::option_table)
    if (const char* v = std::getenv(std::string(row.env).c_str()); v != nullptr && *v != '\0')
      set.push_back(fmt::format("{}={}", row.env, v));
  return set;
}

pool_options pool_options::with(const policy_options& settings) const {
  pool_options o = *this;
  for (const auto& [key, value] : settings) {
    bool found = false;
    for (const auto& row : detail::option_table) {
      if (row.name == key) {
        detail::apply(row, o, value, fmt::format("vram pool setting {}", row.name));
        found = true;
      }
    }
    if (!found) {
      std::string known;
      for (const auto& row : detail::option_table) known += (known.empty() ? "" : ", ") + std::string(row.name);
      throw usage_error("unknown vram pool setting '" + key + "'; known: " + known);
    }
  }
  return o;
}

}  // namespace vram
