// Reader and writer of the PyTorch memory-history CSV. Design decisions:
//  - the header must name exactly the five columns, in order, so a file from another tool fails at line 1
//    rather than being read with its columns mixed up;
//  - rows are parsed in place with std::from_chars; the events vector is reserved from a count of lines,
//    so a row costs no allocation;
//  - blank lines are skipped (an editor's trailing newline, CRLF files);
//  - time_us must not go backwards: the order of rows is their meaning (a free matches the latest alloc at
//    its address), and a backwards step means rows were shuffled or files concatenated.

#include "vram/trace/torch_csv.hpp"

#include <array>
#include <charconv>
#include <climits>
#include <cstring>

#include "vram/trace/csv_fields.hpp"

namespace vram::detail {

namespace {

constexpr std::array<std::string_view, 5> torch_columns = {"time_us", "action", "addr", "size", "stream"};

bool action_from_name(std::string_view name, trace_action& out) noexcept {
  // alloc and the two frees are nearly every row; they are tried first by the enum's order.
  for (std::uint8_t i = 0; i <= static_cast<std::uint8_t>(trace_action::snapshot); ++i) {
    const auto a = static_cast<trace_action>(i);
    if (to_string(a) == name) {
      out = a;
      return true;
    }
  }
  return false;
}

void check_header(std::string_view line, const line_cursor& at) {
  if (line.size() >= 3 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);  // UTF-8 byte order mark
  const std::size_t n = count_fields(line);
  if (n != torch_columns.size())
    at.fail(fmt::format("header has {} columns, expected {}: {}", n, torch_columns.size(), torch_header));
  std::string_view rest = line;
  for (std::size_t i = 0; i < torch_columns.size(); ++i) {
    const std::string_view name = take_field(rest);
    if (name != torch_columns[i])
      at.fail(fmt::format("header column {} is {}, expected '{}' (the header must be {})", i + 1, quote_for_error(name),
                          torch_columns[i], torch_header));
  }
}

// The hot path: one row parsed in place, false on any problem (diagnose_row then names it).
bool parse_row(std::string_view line, trace_event& e) noexcept {
  const char* p = line.data();
  const char* const end = p + line.size();
  const auto number = [&](std::uint64_t& v, bool last) noexcept {
    const auto [ptr, ec] = std::from_chars(p, end, v);
    if (ec != std::errc{}) return false;
    if (last) return ptr == end;
    if (ptr == end || *ptr != ',') return false;
    p = ptr + 1;
    return true;
  };
  std::uint64_t time = 0;
  if (!number(time, false) || time > static_cast<std::uint64_t>(INT64_MAX)) return false;
  e.time_us = static_cast<std::int64_t>(time);
  const auto* comma = static_cast<const char*>(std::memchr(p, ',', static_cast<std::size_t>(end - p)));
  if (comma == nullptr || !action_from_name(std::string_view(p, static_cast<std::size_t>(comma - p)), e.action))
    return false;
  p = comma + 1;
  return number(e.addr, false) && number(e.size, false) && number(e.stream, true);
}

// The slow path, for a row parse_row refused: finds the first problem and throws it.
[[noreturn]] void diagnose_row(std::string_view line, const line_cursor& at) {
  const std::size_t n = count_fields(line);
  if (n != torch_columns.size())
    at.fail(fmt::format("wrong number of fields: {} instead of {} ({})", n, torch_columns.size(), torch_header));
  std::string_view rest = line;
  const std::string_view time = take_field(rest);
  parse_decimal_i64(time, "time_us", at);
  const std::string_view action = take_field(rest);
  trace_action a{};
  if (!action_from_name(action, a)) at.fail(fmt::format("unknown action {}", quote_for_error(action)));
  parse_decimal(take_field(rest), "addr", at);
  parse_decimal(take_field(rest), "size", at);
  parse_decimal(take_field(rest), "stream", at);
  at.fail(fmt::format("malformed row {}", quote_for_error(line)));
}

void append_decimal(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace

std::vector<trace_event> parse_torch_csv(text_source& src, const std::string& path) {
  line_cursor at(path);
  std::string_view piece;
  std::string_view line;
  bool header_seen = false;
  std::vector<trace_event> events;
  events.reserve(row_estimate(src, 32));

  std::int64_t last_time = 0;
  while (src.next(piece)) {
    at.reset(piece);
    while (at.next(line)) {
      if (line.empty()) continue;
      if (!header_seen) {
        check_header(line, at);
        header_seen = true;
        continue;
      }
      trace_event e;
      if (!parse_row(line, e)) diagnose_row(line, at);
      if (e.time_us < last_time)
        at.fail(fmt::format("time_us {} goes backwards (the row before has {})", e.time_us, last_time));
      last_time = e.time_us;
      events.push_back(e);
    }
  }
  if (!header_seen) throw input_error(fmt::format("{}:1: empty file, expected the header {}", path, torch_header));
  return events;
}

std::string format_torch_csv(const trace& t) {
  std::string out;
  out.reserve(torch_header.size() + 1 + t.events.size() * 56);
  out.append(torch_header);
  out += '\n';
  for (const trace_event& e : t.events) {
    append_decimal(out, static_cast<std::uint64_t>(e.time_us));
    out += ',';
    out.append(to_string(e.action));
    out += ',';
    append_decimal(out, e.addr);
    out += ',';
    append_decimal(out, e.size);
    out += ',';
    append_decimal(out, e.stream);
    out += '\n';
  }
  return out;
}

}  // namespace vram::detail
