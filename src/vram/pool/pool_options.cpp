// Parsing of the pool's settings from the environment and from policy specs.
#include "vram/pool/pool_options.hpp"

#include <array>
#include <charconv>
#include <cstdlib>
#include <string_view>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"

namespace vram {

namespace detail {

struct option_row {
  std::string_view name;
  std::string_view env;
  void (*set)(pool_options&, std::string_view value);
};

double parse_ratio(std::string_view name, std::string_view v) {
  double d = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec != std::errc{} || end != v.data() + v.size() || d < 0)
    throw usage_error("vram pool setting " + std::string(name) + "='" + std::string(v) + "': want a number >= 0");
  return d;
}

bool parse_bool(std::string_view name, std::string_view v) {
  if (v == "1" || v == "true" || v == "on") return true;
  if (v == "0" || v == "false" || v == "off") return false;
  throw usage_error("vram pool setting " + std::string(name) + "='" + std::string(v) + "': want 1 or 0");
}

constexpr std::array<option_row, 11> option_table{{
    {"max_cached_ratio", "VRAM_MAX_CACHED_RATIO", [](pool_options& o, std::string_view v) { o.max_cached_ratio = parse_ratio("max_cached_ratio", v); }},
    {"max_handle", "VRAM_MAX_HANDLE", [](pool_options& o, std::string_view v) { o.max_handle_bytes = parse_size(v); }},
    {"small_handle", "VRAM_SMALL_HANDLE", [](pool_options& o, std::string_view v) { o.small_handle_bytes = parse_size(v); }},
    {"burst_bytes", "VRAM_BURST_BYTES", [](pool_options& o, std::string_view v) { o.burst_bytes = parse_size(v); }},
    {"burst_window", "VRAM_BURST_WINDOW", [](pool_options& o, std::string_view v) { o.burst_window_ms = parse_ratio("burst_window", v); }},
    {"aliasing", "VRAM_ALIASING", [](pool_options& o, std::string_view v) { o.aliasing = parse_bool("aliasing", v); }},
    {"reserve_ratio", "VRAM_RESERVE_RATIO", [](pool_options& o, std::string_view v) { o.reserve_ratio = parse_ratio("reserve_ratio", v); }},
    {"limit", "VRAM_LIMIT", [](pool_options& o, std::string_view v) { o.limit = parse_size(v); }},
    {"thread_cache", "VRAM_THREAD_CACHE", [](pool_options& o, std::string_view v) { o.thread_cache = parse_bool("thread_cache", v); }},
    {"thread_cache_bytes", "VRAM_THREAD_CACHE_BYTES", [](pool_options& o, std::string_view v) { o.thread_cache_bytes = parse_size(v); }},
    {"membarrier", "VRAM_MEMBARRIER", [](pool_options& o, std::string_view v) { o.membarrier = parse_bool("membarrier", v); }},
}};

}  // namespace detail

pool_options pool_options::from_environment() {
  pool_options o;
  for (const auto& row : detail::option_table)
    if (const char* v = std::getenv(std::string(row.env).c_str()); v != nullptr && *v != '\0') row.set(o, v);
  return o;
}

pool_options pool_options::with(const policy_options& settings) const {
  pool_options o = *this;
  for (const auto& [key, value] : settings) {
    bool found = false;
    for (const auto& row : detail::option_table) {
      if (row.name == key) {
        row.set(o, value);
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
