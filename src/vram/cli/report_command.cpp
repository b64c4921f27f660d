// `vram report TRACE... [--policy P1,P2] [--device sim[:CAPACITY]] [-o report.html]`: one self-contained HTML
// page that shows where the memory went (docs/report.md).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>

#include "vram/cli/commands.hpp"
#include "vram/cli/progress.hpp"
#include "vram/cli/trace_inputs.hpp"
#include "vram/cli/trace_warnings.hpp"
#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/device_spec.hpp"
#include "vram/policies/registry.hpp"
#include "vram/report/html_page.hpp"
#include "vram/report/report_data.hpp"
#include "vram/trace/file_io.hpp"
#include "vram/trace/trace_check.hpp"

namespace vram::cli {

namespace {

struct report_args {
  std::vector<std::string> traces;
  std::string policies = "vram,torch-native,torch-expandable";
  std::string device = "sim";
  std::string output = "report.html";
  long long points = 32768;
  long long moments = 24;
  std::vector<double> at;
  bool no_fit = false;
  bool no_curve = false;
  bool static_charts = false;
  bool json = false;
  read_options read;
  std::string command_line;
};

void run_report(const report_args& a) {
  report_options o;
  o.policies = parse_policy_list(a.policies);
  // The page tells policies apart by name (a line of the chart, a map at each moment, "Under P" in a sentence):
  // a policy named twice would be two lines of one name, and its failure would be compared with itself.
  std::set<std::string> named;
  for (const auto& p : o.policies)
    if (!named.insert(p).second)
      throw usage_error(fmt::format("bad --policy {}: it names {} twice (settings make another policy: "
                                    "{}:NAME=VALUE)", a.policies, p, p));
  const auto spec = parse_device_spec(a.device);
  if (spec.which == device_spec::kind::cuda)
    throw usage_error("vram report replays on the simulated device, which it can draw: use --device sim[:CAPACITY] "
                      "(vram replay --device cuda measures a GPU)");
  o.device = sim_options(spec);
  if (a.points < 16 || a.points > 1'000'000)
    throw usage_error(fmt::format("bad --points {}: from 16 to 1000000 per series", a.points));
  if (a.moments < 0 || a.moments > 1000) throw usage_error(fmt::format("bad --moments {}: from 0 to 1000", a.moments));
  for (const double s : a.at)
    if (!std::isfinite(s) || s < 0)  // nan and inf too
      throw usage_error(fmt::format("bad --at {}: seconds from the trace's start, a finite number 0 or more", s));
  // The page would replace a trace it was made from (read first, then written over): most likely a slip of
  // the command line, and the trace may be the only copy.
  for (const auto& path : a.traces)
    if (std::error_code ec; std::filesystem::equivalent(path, a.output, ec))
      throw usage_error(fmt::format("bad --output {}: it is the trace {}, which the page would replace", a.output, path));
  o.points = static_cast<std::size_t>(a.points);
  o.moments = static_cast<std::size_t>(a.moments);
  o.at_seconds = a.at;
  o.fit = !a.no_fit;
  o.curve = !a.no_curve;
  // The replays may take minutes: a page that cannot be written is said before them, and an existing one is
  // replaced only once the new one is ready.
  detail::check_writable(a.output);
  check_inputs(a.traces);  // a missing second file fails before the first is replayed
  progress_line progress;
  o.progress = [&](const std::string& what) { progress.show(what); };

  nlohmann::json traces = nlohmann::json::array();
  for (const auto& path : a.traces) {
    progress.show(fmt::format("reading {}", path));
    for (const trace& t : read_input(path, a.read)) {
      const trace_check c = check_trace(t);
      if (const std::string problems = describe_problems(path, t, c); !problems.empty()) {
        progress.clear();
        std::cerr << "warning: " << problems;
        if (c.unmatched_frees + c.double_frees + c.duplicate_allocs > 0)
          std::cerr << "warning: the replays skip unmatched and double frees and allocs at live addresses; the page "
                       "says how many\n";
        if (c.wrong_size_frees > 0) std::cerr << "warning: a free with another size frees its block whole\n";
      }
      traces.push_back(report_trace(t, o));
    }
  }
  progress.show("writing the page");
  nlohmann::json data = {{"version", 1},
                         {"command", a.command_line},
                         {"device", {{"name", o.device.label}, {"capacity", o.device.capacity}}},
                         {"traces", traces}};
  const std::string page = render_report_page(data, !a.static_charts);
  detail::write_file_bytes(a.output, page);
  progress.clear();
  if (a.json) {
    // The page's data: its series run to --points values each, so it is written without indentation.
    std::cout << data.dump() << '\n';
    std::cerr << fmt::format("wrote {} ({})\n", a.output, format_bytes(page.size()));
    return;
  }
  std::cout << fmt::format("wrote {} ({}): {} trace{}, {} polic{}, charts {}; open it in a browser\n", a.output,
                           format_bytes(page.size()), traces.size(), traces.size() == 1 ? "" : "s",
                           o.policies.size(), o.policies.size() == 1 ? "y" : "ies",
                           report_has_chart_library() && !a.static_charts ? "interactive" : "static");
  for (const auto& t : traces)
    for (const auto& f : t["failures"]) std::cout << t["name"].get<std::string>() << ": " << f["sentence"].get<std::string>() << '\n';
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto a = std::make_shared<report_args>();
  auto* cmd = app.add_subcommand("report", "Write one HTML page that shows where the memory went, per trace and policy");
  cmd->add_option("traces", a->traces, "Trace files (every format replay reads)")->required();
  add_device_index_option(cmd, a->read);
  cmd->add_option("--policy,-p", a->policies, "Comma-separated policies, or 'all'")->capture_default_str();
  cmd->add_option("--device,-d", a->device, "sim or sim:CAPACITY (e.g. sim:80GiB)")->capture_default_str();
  cmd->add_option("--output,-o", a->output, "The page to write")->capture_default_str();
  cmd->add_option("--points", a->points, "Buckets per series over the whole trace, each keeping its highest value (the page draws a few thousand a view)")
      ->capture_default_str();
  cmd->add_option("--moments", a->moments, "Evenly spaced moments to draw, besides the peaks and first failures")
      ->capture_default_str();
  cmd->add_option("--at", a->at, "More moments to draw, in seconds from the trace's start (repeatable)");
  cmd->add_flag("--no-fit", a->no_fit, "Skip `fit` per policy (a binary search of replays)");
  cmd->add_flag("--no-curve", a->no_curve, "Skip vram's trade-off curve over its settings");
  cmd->add_flag("--static", a->static_charts, "Static SVG charts even where the chart library is built in");
  cmd->add_flag("--json", a->json, "Print the page's data as JSON (the page is written too)");
  cmd->callback([a] {
    a->command_line = "vram report";
    for (const auto& t : a->traces) a->command_line += " " + t;
    a->command_line += " --policy " + a->policies + " --device " + a->device;
    run_report(*a);
  });
}

}  // namespace vram::cli
