// read_trace / write_trace: the one entry point over the formats. Design decisions:
//  - the format is decided by content, never by file name: gzip by its magic (1f 8b), then vram's own
//    format by its magic, otherwise the first line of the CSV (torch's `time_us,...` or RMM's `Thread,...`);
//  - a plain CSV is read from its file 1 MiB at a time and a gzip CSV inflated 1 MiB at a time, as the
//    parser goes; a vram file, compact, is read whole; a gzip vram file has its header inflated and checked
//    first, then exactly the payload the header announces (and one byte, to see that nothing follows), and
//    no more than deflate can make of the compressed bytes: memory follows the events, not the input's claims;
//  - writers build the whole file in memory and gzip it when the path ends in ".gz".

#include "vram/trace/trace_io.hpp"

#include <fmt/format.h>

#include <optional>

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

trace_format detect_format(std::string_view text, const std::string& path) {
  if (is_vram_format(text)) return trace_format::vram;
  std::string_view first = text.substr(0, text.find('\n'));
  if (first.size() >= 3 && first.substr(0, 3) == "\xEF\xBB\xBF") first.remove_prefix(3);
  if (first.substr(0, 8) == "time_us,") return trace_format::torch;
  if (first.substr(0, 7) == "Thread,") return trace_format::rmm;
  throw input_error(
      fmt::format("{}:1: unknown trace format: the first line {} is neither the torch header ({}) nor the RMM header "
                  "(Thread,Time,Action,Pointer,Size,Stream)",
                  path, quote_for_error(first), torch_header));
}

// deflate makes at most 1032 bytes of one compressed byte (zlib's technical details).
constexpr std::uint64_t max_deflate_ratio = 1032;

/// @brief A gzip-compressed vram file inflated header first (see the design note).
std::string inflate_vram(std::string_view gz, const std::string& path) {
  gzip_inflater in(gz, path);
  std::string out(vram_header_size, '\0');
  out.resize(in.read(out.data(), out.size()));
  const std::uint64_t payload = check_vram_header(out, path);
  if (payload > gz.size() * max_deflate_ratio)
    throw input_error(fmt::format("{}: corrupt vram trace: the header's payload of {} bytes cannot come from {} "
                                  "compressed bytes", path, payload, gz.size()));
  out.resize(vram_header_size + payload + 1);
  out.resize(vram_header_size + in.read(out.data() + vram_header_size, payload + 1));
  return out;  // one byte past the payload, if any, is for parse_vram_format to refuse
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
  if (detail::is_vram_format(start)) {
    file.read_rest(start);
    t.events = detail::parse_vram_format(start, path);
    return t;
  }
  std::string bytes;  // the compressed file, when gzip
  std::optional<detail::text_source> text;
  if (detail::is_gzip(start)) {
    bytes = std::move(start);
    file.read_rest(bytes);
    text.emplace(bytes, path);
  } else {
    text.emplace(file, std::move(start));
  }
  const std::string_view head = text->peek();
  if (head.empty()) throw input_error(fmt::format("{}:1: empty file (after gzip)", path));
  switch (detail::detect_format(head, path)) {
    case trace_format::torch:
      t.events = detail::parse_torch_csv(*text, path);
      break;
    case trace_format::rmm:
      t.events = detail::parse_rmm_csv(*text, path);
      break;
    case trace_format::vram:
      t.events = detail::parse_vram_format(detail::inflate_vram(bytes, path), path);
      break;
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
