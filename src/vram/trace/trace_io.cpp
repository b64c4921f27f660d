// read_trace / write_trace: the one entry point over the formats. Design decisions:
//  - the format is decided by content, never by file name: gzip by its magic (1f 8b), then a pickle (a
//    PyTorch memory snapshot) by its PROTO opcode, vram's own format by its magic, otherwise the first line
//    of the CSV (torch's `time_us,...` or RMM's `Thread,...`);
//  - nothing is read whole before it is checked, so memory follows the events, not the input's size or
//    claims, and a pipe or a device (/dev/zero) is as bounded as a regular file: a plain CSV is read from
//    its file 1 MiB at a time and a gzip file inflated as it is read (256 KiB of compressed input at a
//    time), its first 40 inflated bytes deciding between a pickle, vram's format and CSV; a pickle is run
//    through its opcodes as they arrive (pickle.hpp); a vram file, plain or gzip,
//    has its header checked first, then the payload the header announces is read (and one byte, to see
//    that nothing follows) into a buffer that grows as bytes really arrive;
//  - writers build the whole file in memory and gzip it when the path ends in ".gz".

#include "vram/trace/trace_io.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "vram/core/error.hpp"
#include "vram/trace/csv_fields.hpp"
#include "vram/trace/file_io.hpp"
#include "vram/trace/gzip.hpp"
#include "vram/trace/pickle.hpp"
#include "vram/trace/rmm_csv.hpp"
#include "vram/trace/text_source.hpp"
#include "vram/trace/torch_csv.hpp"
#include "vram/trace/torch_snapshot.hpp"
#include "vram/trace/vram_format.hpp"

namespace vram {

namespace detail {

/// @brief The file name without folders and known extensions: "a/vit_train.csv.gz" -> "vit_train".
std::string trace_name_from_path(std::string_view path) {
  const std::size_t slash = path.find_last_of('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (const std::string_view ext : {".gz", ".csv", ".vram", ".log", ".txt", ".pickle", ".pkl"}) {
      if (name.size() > ext.size() && name.substr(name.size() - ext.size()) == ext) {
        name.remove_suffix(ext.size());
        stripped = true;
      }
    }
  }
  return std::string(name);
}

// A file name's extension in any case: ".CSV.GZ" is a gzip CSV as ".csv.gz" is.
bool ends_with_any_case(std::string_view s, std::string_view suffix) noexcept {
  if (s.size() < suffix.size()) return false;
  const std::string_view tail = s.substr(s.size() - suffix.size());
  return std::equal(tail.begin(), tail.end(), suffix.begin(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
}

// The CSV format by the first line that is not blank: the parsers skip blank lines, before the header too,
// so a file that starts with one (an editor's, a script's "\n" or "\r\n") is read, not refused here. A line
// longer than any trace's is refused before it is judged. @p head holds the first line at least (peek()),
// and in practice 64 KiB: a trace does not start with more blank lines than that.
trace_format detect_csv_format(std::string_view head, const std::string& path) {
  std::size_t line = 1;
  std::string_view first = head.substr(0, head.find('\n'));
  while ((first.empty() || first == "\r") && first.size() < head.size()) {
    head.remove_prefix(first.size() + 1);
    first = head.substr(0, head.find('\n'));
    ++line;
  }
  if (first.size() > text_source::max_line_bytes)
    throw input_error(fmt::format("{}:{}: {}", path, line, text_source::long_line_problem()));
  if (!first.empty() && first.back() == '\r') first.remove_suffix(1);
  if (first.empty())
    throw input_error(fmt::format("{}:1: empty file (blank lines only), expected the header {}", path, torch_header));
  if (first.size() >= 3 && first.substr(0, 3) == "\xEF\xBB\xBF") first.remove_prefix(3);
  if (first.substr(0, 8) == "time_us,") return trace_format::torch;
  if (first.substr(0, 7) == "Thread,") return trace_format::rmm;
  throw input_error(
      fmt::format("{}:{}: unknown trace format: the first line {} is neither the torch header ({}) nor the RMM header "
                  "(Thread,Time,Action,Pointer,Size,Stream), and the file is not vram's format or a PyTorch memory "
                  "snapshot (a pickle)",
                  path, line, quote_for_error(first), torch_header));
}

std::vector<trace_event> parse_csv_text(text_source& text) {
  if (detect_csv_format(text.peek(), text.path()) == trace_format::torch) return parse_torch_csv(text, text.path());
  return parse_rmm_csv(text, text.path());
}

// The first inflated bytes of a gzip file: enough to tell vram's format, a pickle and CSV apart.
std::string read_gzip_head(gzip_inflater& in) {
  std::string head(vram_header_size, '\0');
  head.resize(in.read(head.data(), head.size()));
  if (head.empty()) throw input_error(fmt::format("{}:1: empty file (after gzip)", in.path()));
  return head;
}

// A gzip file, from memory or a file, after its first bytes: vram's format (header first) or CSV.
std::vector<trace_event> read_gzip(std::unique_ptr<gzip_inflater> in, std::string head) {
  const std::string& path = in->path();  // the file's or the caller's: it outlives the inflater
  if (is_vram_format(head)) {
    const auto read = [&in](char* out, std::size_t len) { return in->read(out, len); };
    return read_vram_format(std::move(head), read, 0, in->input_size(), path);
  }
  text_source text(std::move(in), std::move(head));
  return parse_csv_text(text);
}

// A PyTorch memory snapshot: one trace per device with entries ("NAME.devN" unless only device 0 has any).
std::vector<trace> snapshot_traces(std::string start, const pickle_read& read, const std::string& path,
                                   const std::string& name, const read_options& options) {
  const pickle_tree tree = read_pickle(std::move(start), read, path, {}, &snapshot_records());
  std::vector<snapshot_device_trace> devices = read_torch_snapshot(tree, path);
  if (options.device_index) {
    std::vector<int> present;
    for (const auto& d : devices) present.push_back(d.device);
    std::erase_if(devices, [&](const snapshot_device_trace& d) { return d.device != *options.device_index; });
    if (devices.empty())
      throw input_error(fmt::format("{}: no trace entries for device {}; the snapshot has them for device {}", path,
                                    *options.device_index, fmt::join(present, ", ")));
  }
  const bool plain = devices.size() == 1 && devices.front().device == 0;
  std::vector<trace> out;
  for (auto& d : devices) {
    trace t;
    t.name = plain ? name : fmt::format("{}.dev{}", name, d.device);
    t.events = std::move(d.events);
    t.notes = std::move(d.notes);
    out.push_back(std::move(t));
  }
  return out;
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

trace_format format_for_name(std::string_view path) noexcept {
  if (detail::ends_with_any_case(path, ".gz")) path.remove_suffix(3);
  return detail::ends_with_any_case(path, ".csv") ? trace_format::torch : trace_format::vram;
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

std::vector<trace> read_traces(const std::string& path, const read_options& options) {
  detail::input_file file(path);
  std::string start(16, '\0');
  start.resize(file.read(start.data(), start.size()));
  if (start.empty()) throw input_error(fmt::format("{}:1: empty file", path));
  const std::string name = detail::trace_name_from_path(path);
  std::vector<trace> out(1);
  out[0].name = name;
  if (detail::is_gzip(start)) {
    auto in = std::make_unique<detail::gzip_inflater>(file, std::move(start));
    std::string head = detail::read_gzip_head(*in);
    if (detail::is_pickle(head)) {
      const detail::pickle_read read = [&in](char* o, std::size_t len) { return in->read(o, len); };
      return detail::snapshot_traces(std::move(head), read, path, name, options);
    }
    out[0].events = detail::read_gzip(std::move(in), std::move(head));
  } else if (detail::is_pickle(start)) {
    const detail::pickle_read read = [&file](char* o, std::size_t len) { return file.read(o, len); };
    return detail::snapshot_traces(std::move(start), read, path, name, options);
  } else if (detail::is_vram_format(start)) {
    const auto read = [&file](char* o, std::size_t len) { return file.read(o, len); };
    std::string note;
    out[0].events = detail::read_vram_format(std::move(start), read, file.size(), 0, path, &note);
    if (!note.empty()) out[0].notes.push_back(std::move(note));
  } else {
    detail::text_source text(file, std::move(start));
    out[0].events = detail::parse_csv_text(text);
  }
  // Said, not refused: such a file is one device's trace (vram record writes device N > 0 to NAME.devN), and
  // the user asking for device N of it should hear that the choice had nothing to choose from.
  if (options.device_index)
    out[0].notes.push_back(fmt::format("--device-index {} left unused: only a PyTorch snapshot holds the traces of "
                                       "several devices, and this file is one trace, read whole",
                                       *options.device_index));
  return out;
}

trace read_trace(const std::string& path, const read_options& options) {
  std::vector<trace> traces = read_traces(path, options);
  if (traces.size() > 1) {
    std::vector<std::string> names;
    for (const auto& t : traces) names.push_back(t.name);
    throw input_error(fmt::format("{}: a snapshot with traces for several devices ({}): choose one with "
                                  "--device-index N",
                                  path, fmt::join(names, ", ")));
  }
  return std::move(traces.front());
}

std::size_t rows_written(const trace& t, trace_format f) {
  if (f != trace_format::rmm) return t.events.size();
  return static_cast<std::size_t>(
      std::count_if(t.events.begin(), t.events.end(), [](const trace_event& e) { return detail::rmm_logs(e.action); }));
}

std::size_t rows_retimed(const trace& t, trace_format f) {
  return f == trace_format::rmm ? detail::rmm_retimed_rows(t) : 0;
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
  // ".gz" in any case, as format_for_name reads ".CSV.GZ": a file named .GZ must be gzip, or zcat and the like
  // refuse it.
  if (detail::ends_with_any_case(path, ".gz")) text = detail::gzip(text);
  detail::write_file_bytes(path, text);
}

}  // namespace vram
