// Reader and writer of the PyTorch memory-history CSV. Design decisions:
//  - the header must name exactly the five columns, in order, so a file from another tool fails at line 1
//    rather than being read with its columns mixed up;
//  - the fast path parses a row in one forward pass over its bytes (digits, the action by its length and
//    a compare, the line's end) with no search for the line first and no allocation; any row it refuses
//    (the header, a blank line, a bad row) goes to the slow path, which splits the line into fields and
//    either reads it (an odd but valid row, such as one with leading zeros) or names its first problem;
//  - the events vector is reserved from the text's size, so rows do not move while parsing;
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
  trace_action a;
  switch (name.size()) {  // the names differ in length, but for two pairs that differ in one letter
    case 3:
      a = trace_action::oom;
      break;
    case 5:
      a = trace_action::alloc;
      break;
    case 8:
      a = trace_action::snapshot;
      break;
    case 11:
      a = trace_action::segment_map;
      break;
    case 12:
      a = trace_action::segment_free;
      break;
    case 13:
      a = name[8] == 'a' ? trace_action::segment_alloc : trace_action::segment_unmap;
      break;
    case 14:
      a = name[5] == 'r' ? trace_action::free_requested : trace_action::free_completed;
      break;
    default:
      return false;
  }
  if (to_string(a) != name) return false;
  out = a;
  return true;
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

// Up to 19 decimal digits cannot overflow 64 bits; a 20th is checked; the fast path leaves longer numbers
// (leading zeros) to the slow path.
inline bool read_decimal(const char*& p, const char* end, std::uint64_t& v) noexcept {
  const char* q = p;
  const char* const easy_end = end - q > 19 ? q + 19 : end;
  std::uint64_t x = 0;
  while (q < easy_end && static_cast<unsigned char>(*q - '0') < 10) x = x * 10 + static_cast<unsigned>(*q++ - '0');
  if (q == p) return false;
  if (q < end && static_cast<unsigned char>(*q - '0') < 10) {
    const auto d = static_cast<unsigned>(*q++ - '0');
    if (x > (UINT64_MAX - d) / 10) return false;
    x = x * 10 + d;
    if (q < end && static_cast<unsigned char>(*q - '0') < 10) return false;
  }
  p = q;
  v = x;
  return true;
}

inline bool expect(const char*& p, const char* end, char c) noexcept {
  if (p == end || *p != c) return false;
  ++p;
  return true;
}

// The fast path: one row from p; on success p moves past its line end and true is returned.
inline bool parse_row_fast(const char*& p, const char* end, trace_event& e) noexcept {
  const char* q = p;
  std::uint64_t time = 0;
  if (!read_decimal(q, end, time) || time > static_cast<std::uint64_t>(INT64_MAX) || !expect(q, end, ',')) return false;
  const char* name = q;
  while (q < end && *q != ',' && *q != '\n') ++q;
  if (!action_from_name(std::string_view(name, static_cast<std::size_t>(q - name)), e.action) || !expect(q, end, ','))
    return false;
  if (!read_decimal(q, end, e.addr) || !expect(q, end, ',') || !read_decimal(q, end, e.size) || !expect(q, end, ',') ||
      !read_decimal(q, end, e.stream))
    return false;
  if (q != end && *q == '\r') ++q;
  if (q != end && !expect(q, end, '\n')) return false;
  e.time_us = static_cast<std::int64_t>(time);
  p = q;
  return true;
}

// The slow path, for a row parse_row_fast refused: reads it field by field or throws its first problem.
trace_event parse_row_slow(std::string_view line, const line_cursor& at) {
  const std::size_t n = count_fields(line);
  if (n != torch_columns.size())
    at.fail(fmt::format("wrong number of fields: {} instead of {} ({})", n, torch_columns.size(), torch_header));
  std::string_view rest = line;
  trace_event e;
  e.time_us = parse_decimal_i64(take_field(rest), "time_us", at);
  const std::string_view action = take_field(rest);
  if (!action_from_name(action, e.action)) at.fail(fmt::format("unknown action {}", quote_for_error(action)));
  e.addr = parse_decimal(take_field(rest), "addr", at);
  e.size = parse_decimal(take_field(rest), "size", at);
  e.stream = parse_decimal(take_field(rest), "stream", at);
  return e;
}

void append_decimal(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace

std::vector<trace_event> parse_torch_csv(text_source& src, const std::string& path) {
  line_cursor at(path);
  std::vector<trace_event> events;
  events.reserve(src.row_estimate(40));
  bool header_seen = false;
  std::int64_t last_time = 0;
  std::string_view piece;
  std::string_view line;
  while (src.next(piece)) {
    at.reset(piece);
    const char* p = piece.data();
    const char* const end = p + piece.size();
    while (p < end) {
      trace_event e;
      if (header_seen && parse_row_fast(p, end, e)) {
        at.advance_to(p);
      } else {
        at.seek(p);
        at.next(line);
        p = at.position();
        if (line.empty()) continue;
        if (!header_seen) {
          check_header(line, at);
          header_seen = true;
          continue;
        }
        e = parse_row_slow(line, at);
      }
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
