// `vram convert IN -o OUT [--to FORMAT]`: between PyTorch's CSV, RMM's log CSV and vram's format, and from a
// PyTorch memory snapshot (one device of it: --device-index where it holds several).
#include <fmt/format.h>

#include <iostream>

#include <nlohmann/json.hpp>

#include "vram/cli/commands.hpp"
#include "vram/cli/progress.hpp"
#include "vram/cli/trace_inputs.hpp"
#include "vram/cli/trace_warnings.hpp"
#include "vram/core/error.hpp"
#include "vram/trace/file_io.hpp"
#include "vram/trace/trace_check.hpp"
#include "vram/trace/trace_io.hpp"

namespace vram::cli {

namespace {

struct convert_args {
  std::string input;
  std::string output;
  std::string to;  // empty: from the output's name
  bool force = false;
  bool json = false;
  read_options read;
};

void run_convert(const convert_args& a) {
  const trace_format f = a.to.empty() ? format_for_name(a.output) : parse_trace_format(a.to);
  detail::check_writable(a.output);  // before the input is read
  progress_line progress;
  progress.show(fmt::format("reading {}", a.input));
  const trace t = read_trace(a.input, a.read);
  progress.clear();
  print_notes(a.input, t);
  const std::string problems = describe_problems(a.input, t, check_trace(t));
  if (!problems.empty()) {
    if (!a.force) throw input_error(problems + "not converted (use --force to convert it as it is)");
    std::cerr << "warning: " << problems;
  }
  progress.show(fmt::format("writing {} ({} events)", a.output, t.events.size()));
  write_trace(a.output, t, f);
  progress.clear();
  const std::size_t written = rows_written(t, f);  // an RMM log has no rows for the rest
  const std::size_t retimed = rows_retimed(t, f);
  if (a.json) {
    std::cout << nlohmann::json{{"input", a.input},
                                {"output", a.output},
                                {"format", to_string(f)},
                                {"events_read", t.events.size()},
                                {"events_written", written},
                                {"events_retimed", retimed},
                                {"notes", t.notes}}
                     .dump(2)
              << '\n';
    return;
  }
  std::cout << fmt::format("wrote {}: {} events, {} format", a.output, written, to_string(f));
  if (written != t.events.size())
    std::cout << fmt::format(" ({} rows of {} left out: an RMM log has no segments, completed frees or snapshots)",
                             t.events.size() - written, t.events.size());
  // An RMM log's Time is a time of day: a clock from the epoch (PyTorch's) or a gap of 12 hours or more does
  // not come back, and the user should hear so rather than find shifted times later.
  if (retimed != 0)
    std::cout << fmt::format(" (times as times of day: {} of the {} rows read back with other times, counted from "
                             "the first midnight)",
                             retimed, written);
  std::cout << '\n';
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto a = std::make_shared<convert_args>();
  auto* cmd = app.add_subcommand("convert", "Convert a trace between formats (torch, rmm, vram)");
  cmd->add_option("input", a->input, "Input trace or PyTorch snapshot (format detected)")->required();
  cmd->add_option("-o,--output", a->output, "Output file (.gz for gzip)")->required();
  cmd->add_option("--to", a->to, "torch, rmm or vram (default: torch for a .csv or .csv.gz output, else vram)");
  cmd->add_flag("--force", a->force, "Convert even when frees do not match allocations");
  cmd->add_flag("--json", a->json, "Print what was written as JSON: input, output, format, events_read, events_written, "
                                   "events_retimed (rows an RMM log gives back at other times), notes (what the "
                                   "reader inferred)");
  add_device_index_option(cmd, a->read);
  cmd->callback([a] { run_convert(*a); });
}

}  // namespace vram::cli
