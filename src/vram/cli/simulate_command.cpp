// `vram simulate WORKLOAD -o FILE`: writes a synthetic workload as a trace file.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include <nlohmann/json.hpp>

#include "vram/cli/commands.hpp"
#include "vram/cli/progress.hpp"
#include "vram/core/error.hpp"
#include "vram/trace/file_io.hpp"
#include "vram/trace/trace_io.hpp"
#include "vram/workload/workload.hpp"

namespace vram::cli {

namespace {

struct simulate_args {
  std::string workload;
  std::string output;
  std::string format;
  bool json = false;
  workload_options options;
};

void run_simulate(const simulate_args& a) {
  const trace_format f = a.format.empty() ? format_for_name(a.output) : parse_trace_format(a.format);
  check_workload_options(a.options);
  detail::check_writable(a.output);  // before the workload is made: 72 hours take seconds
  progress_line progress;
  progress.show(fmt::format("making {}", a.workload));
  const trace t = make_workload(a.workload, a.options);
  progress.show(fmt::format("writing {} ({} events)", a.output, t.events.size()));
  write_trace(a.output, t, f);
  progress.clear();
  if (a.json) {
    nlohmann::json j{{"output", a.output},
                     {"workload", a.workload},
                     {"seed", a.options.seed},
                     {"format", to_string(f)},
                     {"events", t.events.size()},
                     {"trace_seconds", t.seconds()}};
    if (a.workload == "inference") j["hours"] = a.options.hours;  // the settings the workload reads
    if (a.workload == "mixed") j["scale"] = a.options.scale;
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("wrote {}: workload {}, {} events over {:.1f} s of trace time, {} format\n", a.output,
                           a.workload, t.events.size(), t.seconds(), to_string(f));
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto a = std::make_shared<simulate_args>();
  std::string names;
  for (const auto& w : workloads()) names += fmt::format("\n  {:<12} {}", w.name, w.summary);
  auto* cmd = app.add_subcommand("simulate", "Write a synthetic workload as a trace file");
  cmd->add_option("workload", a->workload, "One of:" + names)->required();
  cmd->add_option("-o,--output", a->output, "Output file (.csv/.csv.gz: PyTorch CSV; otherwise vram format)")->required();
  cmd->add_option("--format", a->format, "torch, rmm or vram (default: from the file name)");
  cmd->add_option("--seed", a->options.seed, "Random seed")->check(whole_number)->capture_default_str();
  auto* hours = cmd->add_option("--hours", a->options.hours, "inference: hours of simulated traffic")->capture_default_str();
  auto* scale = cmd->add_option("--scale", a->options.scale, "mixed: multiplies the number of operations")
                    ->check(whole_number)
                    ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print what was written as JSON: output, workload, seed, format, events, "
                                   "trace_seconds, and hours (inference) or scale (mixed)");
  cmd->callback([a, hours, scale] {
    // A setting the workload does not read would be taken without a word and change nothing.
    const auto& known = workloads();
    const bool named = std::any_of(known.begin(), known.end(), [&](const auto& w) { return w.name == a->workload; });
    for (const auto& [option, reader] : {std::pair{hours, "inference"}, std::pair{scale, "mixed"}})
      if (named && option->count() > 0 && a->workload != reader)
        throw usage_error(fmt::format("{} applies to the {} workload only; {} does not read it", option->get_name(),
                                      reader, a->workload));
    run_simulate(*a);
  });
}

}  // namespace vram::cli
