// Reader and writer of RMM's logging_resource_adaptor CSV. Design decisions:
//  - Time is a time of day (`HH:MM:SS.ffffff`, as RMM's logger pattern writes it); a log that runs past
//    midnight is read by adding a day whenever the time steps back by more than 12 hours. Some RMM docs
//    show seconds since the epoch (`1634567890.123456`); that form is accepted too;
//  - threads race to the log, so a row's time can be a few microseconds earlier than the row before it;
//    the rows keep their order (the order is what matches frees to allocs) and such a row takes the time
//    of the row before, so read traces are always monotone;
//  - Pointer and Stream are hexadecimal with or without "0x"; Thread is kept out of the trace;
//  - "deallocate" is read as a free, as some RMM docs spell it.

#include "vram/trace/rmm_csv.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>

#include "vram/trace/csv_fields.hpp"

namespace vram::detail {

namespace {

constexpr std::array<std::string_view, 6> rmm_columns = {"Thread", "Time", "Action", "Pointer", "Size", "Stream"};
constexpr std::int64_t us_per_day = 86'400'000'000;
constexpr std::int64_t us_half_day = us_per_day / 2;

// The reader's times from the log's times of day: a step back of more than half a day is past midnight; a
// smaller one is threads racing to the log, and takes the time before. The writer's retimed count runs the
// same steps, so it counts exactly what a reader gets back changed.
class log_clock {
 public:
  std::int64_t next(std::int64_t raw) noexcept {
    if (last_raw_ >= 0 && raw + us_half_day < last_raw_) day_offset_ += us_per_day;  // past midnight
    last_raw_ = raw;
    last_time_ = std::max(raw + day_offset_, last_time_);  // threads racing to the log
    return last_time_;
  }

 private:
  std::int64_t day_offset_ = 0;
  std::int64_t last_raw_ = -1;
  std::int64_t last_time_ = 0;
};

void check_header(std::string_view line, const line_cursor& at) {
  if (line.size() >= 3 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
  const std::size_t n = count_fields(line);
  if (n != rmm_columns.size())
    at.fail(fmt::format("header has {} columns, expected {}: {}", n, rmm_columns.size(), rmm_header));
  std::string_view rest = line;
  for (std::size_t i = 0; i < rmm_columns.size(); ++i) {
    const std::string_view name = take_field(rest);
    if (name != rmm_columns[i])
      at.fail(fmt::format("header column {} is {}, expected '{}' (the header must be {})", i + 1, quote_for_error(name),
                          rmm_columns[i], rmm_header));
  }
}

bool all_digits(std::string_view s) noexcept {
  for (const char c : s)
    if (c < '0' || c > '9') return false;
  return !s.empty();
}

// Digits of a fraction of a second, as microseconds ("5" -> 500000, "123456789" -> 123456).
std::int64_t fraction_us(std::string_view digits) noexcept {
  std::int64_t us = 0;
  for (std::size_t i = 0; i < 6; ++i) us = us * 10 + (i < digits.size() ? digits[i] - '0' : 0);
  return us;
}

// "HH:MM:SS.ffffff" -> microseconds since midnight, or "S.ffffff" -> microseconds; -1 when malformed.
std::int64_t parse_time(std::string_view s) noexcept {
  const std::size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  const std::string_view frac = dot == std::string_view::npos ? std::string_view{} : s.substr(dot + 1);
  if (dot != std::string_view::npos && !all_digits(frac)) return -1;
  if (whole.size() == 8 && whole[2] == ':' && whole[5] == ':') {
    const std::string_view h = whole.substr(0, 2), m = whole.substr(3, 2), sec = whole.substr(6, 2);
    if (!all_digits(h) || !all_digits(m) || !all_digits(sec)) return -1;
    const int hh = (h[0] - '0') * 10 + (h[1] - '0');
    const int mm = (m[0] - '0') * 10 + (m[1] - '0');
    const int ss = (sec[0] - '0') * 10 + (sec[1] - '0');
    if (hh > 23 || mm > 59 || ss > 60) return -1;
    return (std::int64_t{hh} * 3600 + mm * 60 + ss) * 1'000'000 + fraction_us(frac);
  }
  if (!all_digits(whole) || whole.size() > 12) return -1;  // seconds since the epoch, up to year 33658
  std::int64_t sec = 0;
  std::from_chars(whole.data(), whole.data() + whole.size(), sec);
  return sec * 1'000'000 + fraction_us(frac);
}

// Hexadecimal with an optional "0x"; false when malformed or wider than 64 bits.
bool parse_hex(std::string_view s, std::uint64_t& v) noexcept {
  if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  return ec == std::errc{} && ptr == s.data() + s.size();
}

std::string hex_problem(std::string_view field, std::string_view column) {
  if (field.empty()) return fmt::format("empty {}", column);
  if (field.front() == '-') return fmt::format("negative {} {}", column, quote_for_error(field));
  std::string_view digits = field;
  if (digits.size() >= 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) digits.remove_prefix(2);
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 16);
  if (ec == std::errc::result_out_of_range)
    return fmt::format("{} {} overflows 64 bits", column, quote_for_error(field));
  return fmt::format("{} {} is not a hexadecimal number", column, quote_for_error(field));
}

bool action_from_rmm(std::string_view s, trace_action& a) noexcept {
  if (s == "allocate")
    a = trace_action::alloc;
  else if (s == "free" || s == "deallocate")
    a = trace_action::free_requested;
  else if (s == "allocate failure")
    a = trace_action::oom;
  else
    return false;
  return true;
}

void append_hex(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, 16);
  out += "0x";
  out.append(buf, r.ptr);
}

// The time of day a trace's time_us is written as (what the Time column can hold).
std::int64_t time_of_day(std::int64_t time_us) noexcept { return ((time_us % us_per_day) + us_per_day) % us_per_day; }

void append_two(std::string& out, std::int64_t v) {
  out += static_cast<char>('0' + v / 10);
  out += static_cast<char>('0' + v % 10);
}

}  // namespace

std::vector<trace_event> parse_rmm_csv(text_source& src, const std::string& path) {
  line_cursor at(path);
  std::string_view piece;
  std::string_view line;
  bool header_seen = false;
  std::vector<trace_event> events;
  events.reserve(src.row_estimate(56));

  log_clock clock;
  while (src.next(piece)) {
    at.reset(piece);
    while (at.next(line)) {
      if (line.empty()) continue;
      if (!header_seen) {
        check_header(line, at);
        header_seen = true;
        continue;
      }
      const std::size_t n = count_fields(line);
      if (n != rmm_columns.size())
        at.fail(fmt::format("wrong number of fields: {} instead of {} ({})", n, rmm_columns.size(), rmm_header));
      std::string_view rest = line;
      if (take_field(rest).empty()) at.fail("empty Thread");
      const std::string_view time = take_field(rest);
      const std::int64_t raw = parse_time(time);
      if (raw < 0) at.fail(fmt::format("Time {} is not HH:MM:SS.ffffff", quote_for_error(time)));
      trace_event e;
      const std::string_view action = take_field(rest);
      if (!action_from_rmm(action, e.action))
        at.fail(
            fmt::format("unknown action {} (expected allocate, free or allocate failure)", quote_for_error(action)));
      const std::string_view pointer = take_field(rest);
      if (!parse_hex(pointer, e.addr)) at.fail(hex_problem(pointer, "Pointer"));
      e.size = parse_decimal(take_field(rest), "Size", at);
      const std::string_view stream = take_field(rest);
      if (!parse_hex(stream, e.stream)) at.fail(hex_problem(stream, "Stream"));

      e.time_us = clock.next(raw);
      events.push_back(e);
    }
  }
  if (!header_seen) throw input_error(fmt::format("{}:1: empty file, expected the header {}", path, rmm_header));
  return events;
}

std::size_t rmm_retimed_rows(const trace& t) {
  // The reader's clock over the times the writer writes.
  std::size_t changed = 0;
  log_clock clock;
  for (const trace_event& e : t.events)
    if (rmm_logs(e.action)) changed += clock.next(time_of_day(e.time_us)) != e.time_us;
  return changed;
}

std::string format_rmm_csv(const trace& t) {
  std::string out;
  out.reserve(rmm_header.size() + 1 + t.events.size() * 64);
  out.append(rmm_header);
  out += '\n';
  for (const trace_event& e : t.events) {
    if (!rmm_logs(e.action)) continue;
    std::string_view action;
    switch (e.action) {
      case trace_action::alloc:
        action = "allocate";
        break;
      case trace_action::free_requested:
        action = "free";
        break;
      default:  // oom, the one other row rmm_logs keeps
        action = "allocate failure";
        break;
    }
    const std::int64_t tod = time_of_day(e.time_us);
    const std::int64_t sec = tod / 1'000'000;
    out += "1,";
    append_two(out, sec / 3600);
    out += ':';
    append_two(out, sec / 60 % 60);
    out += ':';
    append_two(out, sec % 60);
    out += '.';
    char frac[8];
    const std::int64_t us = tod % 1'000'000;
    for (int i = 5, v = static_cast<int>(us); i >= 0; --i, v /= 10) frac[i] = static_cast<char>('0' + v % 10);
    out.append(frac, 6);
    out += ',';
    out.append(action);
    out += ',';
    append_hex(out, e.action == trace_action::oom ? 0 : e.addr);
    out += ',';
    char buf[24];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, e.size).ptr);
    out += ',';
    append_hex(out, e.stream);
    out += '\n';
  }
  return out;
}

}  // namespace vram::detail
