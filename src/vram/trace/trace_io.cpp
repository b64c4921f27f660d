// read_trace / write_trace: the one entry point over the formats. Design decisions:
//  - the format is decided by content, never by file name: gzip by its magic (1f 8b), then vram's own
//    format by its magic, otherwise the first line of the CSV (torch's `time_us,...` or RMM's `Thread,...`);
//  - nothing is read whole before it is checked, so memory follows the events, not the input's size or
//    claims, and a pipe or a device (/dev/zero) is as bounded as a regular file: a plain CSV is read from
//    its file 1 MiB at a time and a gzip file inflated as it is read (256 KiB of compressed input at a
//    time), its first 40 inflated bytes deciding between vram's format and CSV; a vram file, plain or gzip,
//    has its header checked first, then the payload the header announces is read (and one byte, to see
//    that nothing follows) into a buffer that grows as bytes really arrive;
//  - writers build the whole file in memory and gzip it when the path ends in ".gz".

#include "vram/trace/trace_io.hpp"

#include <fmt/format.h>

#include <memory>

#include "vram/core/error.hpp"
#include "vram/trace/csv_fields.hpp"
#include "vram/trace/file_io.hpp"
#include "vram/trace/gzip.hpp"
#include "vram/trace/rmm_csv.hpp"
#include "vram/trace/text_source.hpp"
#include "vram/trace/torch_csv.hpp"
#include "vram/trace/vram_format.hpp"

namespace vram {

namespace detail {

/// @brief The file name without folders and known extensions: "a/vit_train.csv.gz" -> "vit_train".
std::string trace_name_from_path(std::string_view path) {
  const std::size_t slash = path.find_last_of('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (const std::string_view ext : {".gz", ".csv", ".vram", ".log", ".txt"}) {
      if (name.size() > ext.size() && name.substr(name.size() - ext.size()) == ext) {
        name.remove_suffix(ext.size());
        stripped = true;
      }
    }
  }
  return std::string(name);
}

bool ends_with(std::string_view s, std::string_view suffix) noexcept {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The CSV format by the first line; a first line longer than any trace's is refused before it is judged.
trace_format detect_csv_format(std::string_view head, const std::string& path) {
  std::string_view first = head.substr(0, head.find('\n'));
  if (first.size() > text_source::max_line_bytes)
    throw input_error(fmt::format("{}:1: {}", path, text_source::long_line_problem()));
  if (first.size() >= 3 && first.substr(0, 3) == "\xEF\xBB\xBF") first.remove_prefix(3);
  if (first.substr(0, 8) == "time_us,") return trace_format::torch;
  if (first.substr(0, 7) == "Thread,") return trace_format::rmm;
  throw input_error(
      fmt::format("{}:1: unknown trace format: the first line {} is neither the torch header ({}) nor the RMM header "
                  "(Thread,Time,Action,Pointer,Size,Stream)",
                  path, quote_for_error(first), torch_header));
}

std::vector<trace_event> parse_csv_text(text_source& text) {
  if (detect_csv_format(text.peek(), text.path()) == trace_format::torch) return parse_torch_csv(text, text.path());
  return parse_rmm_csv(text, text.path());
}

// A gzip file, from memory or a file: vram's format (header first) or CSV, by the first 40 inflated bytes.
std::vector<trace_event> read_gzip(std::unique_ptr<gzip_inflater> in) {
  const std::string& path = in->path();  // the file's or the caller's: it outlives the inflater
  std::string head(vram_header_size, '\0');
  head.resize(in->read(head.data(), head.size()));
  if (head.empty()) throw input_error(fmt::format("{}:1: empty file (after gzip)", path));
  if (is_vram_format(head)) {
    const auto read = [&in](char* out, std::size_t len) { return in->read(out, len); };
    return read_vram_format(std::move(head), read, 0, in->input_size(), path);
  }
  text_source text(std::move(in), std::move(head));
  return parse_csv_text(text);
}

// Every reader returns non-negative, non-decreasing times; a trace that breaks that cannot be written.
void check_writable(const trace& t, const std::string& path) {
  std::int64_t last = 0;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const std::int64_t time = t.events[i].time_us;
    if (time < 0)
      throw usage_error(
          fmt::format("{}: cannot write trace '{}': event {} has negative time_us {}", path, t.name, i, time));
    if (time < last)
      throw usage_error(
          fmt::format("{}: cannot write trace '{}': event {} has time_us {}, earlier than {} of the event "
                      "before (traces must be in time order)",
                      path, t.name, i, time, last));
    last = time;
  }
}

}  // namespace detail

trace_format parse_trace_format(std::string_view name) {
  if (name == "torch") return trace_format::torch;
  if (name == "rmm") return trace_format::rmm;
  if (name == "vram") return trace_format::vram;
  throw usage_error(fmt::format("unknown trace format '{}': expected torch, rmm or vram", name));
}

std::string_view to_string(trace_format f) noexcept {
  switch (f) {
    case trace_format::torch:
      return "torch";
    case trace_format::rmm:
      return "rmm";
    case trace_format::vram:
      return "vram";
  }
  return "unknown";
}

trace read_trace(const std::string& path) {
  detail::input_file file(path);
  std::string start(16, '\0');
  start.resize(file.read(start.data(), start.size()));
  if (start.empty()) throw input_error(fmt::format("{}:1: empty file", path));
  trace t;
  t.name = detail::trace_name_from_path(path);
  if (detail::is_gzip(start)) {
    t.events = detail::read_gzip(std::make_unique<detail::gzip_inflater>(file, std::move(start)));
  } else if (detail::is_vram_format(start)) {
    const auto read = [&file](char* out, std::size_t len) { return file.read(out, len); };
    t.events = detail::read_vram_format(std::move(start), read, file.size(), 0, path);
  } else {
    detail::text_source text(file, std::move(start));
    t.events = detail::parse_csv_text(text);
  }
  return t;
}

void write_trace(const std::string& path, const trace& t, trace_format f) {
  detail::check_writable(t, path);
  std::string text;
  switch (f) {
    case trace_format::torch:
      text = detail::format_torch_csv(t);
      break;
    case trace_format::rmm:
      text = detail::format_rmm_csv(t);
      break;
    case trace_format::vram:
      text = detail::format_vram(t);
      break;
  }
  if (detail::ends_with(path, ".gz")) text = detail::gzip(text);
  detail::write_file_bytes(path, text);
}

}  // namespace vram
