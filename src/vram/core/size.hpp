#pragma once
// Byte sizes written by people: "80GiB", "143771MiB", "512", "1.5GiB", "2MB" (MB = 10^6 B, MiB = 2^20 B);
// spans of time: "5ms", "250us", "1.5s", "100ns".

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vram {

/// @brief Parses a size. @throws usage_error naming the text for a malformed, negative or overflowing one.
std::size_t parse_size(std::string_view text);

/// @brief Parses a span of time, with its unit (ns, us, ms or s), into whole nanoseconds.
/// @throws usage_error naming the text for a malformed, negative, unitless (but 0) or overflowing one.
std::int64_t parse_duration_ns(std::string_view text);

/// @brief Formats bytes for a table: "512 B", "3.00 MiB", "5.35 GiB".
std::string format_bytes(std::size_t bytes);

/// @brief A span of time for people: "12.345 s" under two minutes, "12.5 min" under two hours, else
/// "72.0 h".
std::string format_duration(double seconds);

}  // namespace vram
