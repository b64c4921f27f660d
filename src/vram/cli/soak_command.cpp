// `vram soak [--hours H] [--headroom X] [--policy P1,P2] [--seed N] [--json]`: the inference workload for H
// simulated hours, each policy on a device of X times its peak live bytes; whether and when each fails, and
// how its reserved memory creeps (src/vram/replay/soak.hpp, docs/soak.md).
#include <fmt/format.h>

#include <iostream>

#include "vram/cli/commands.hpp"
#include "vram/cli/progress.hpp"
#include "vram/replay/soak.hpp"
#include "vram/report/soak_table.hpp"
#include "vram/workload/workload.hpp"

namespace vram::cli {

namespace {

struct soak_args {
  double hours = 72.0;
  double headroom = 1.05;
  std::string policies = "all";
  std::uint64_t seed = 1;
  bool json = false;
};

void run_soak_command(const soak_args& a) {
  soak_options o;
  o.hours = a.hours;
  o.headroom = a.headroom;
  o.seed = a.seed;
  if (a.policies != "all") o.policies.push_back(a.policies);
  check_soak_options(o);  // bad arguments fail before the workload is made
  progress_line progress;
  progress.show(fmt::format("soak: making {} hours of the inference workload", a.hours));
  o.progress = [&](std::string_view policy, double done, double total) {
    progress.show(fmt::format("soak: {} at {:.1f} of {} simulated hours", policy, done, total));
  };
  const soak_report report = run_soak(o);
  progress.clear();
  if (a.json) {
    std::cout << to_json(report).dump(2) << '\n';
  } else {
    std::cout << format_soak_table(report);
  }
}

}  // namespace

void add_soak_command(CLI::App& app) {
  auto a = std::make_shared<soak_args>();
  auto* cmd = app.add_subcommand(
      "soak", "Run a long inference service per allocator on a device with little headroom: failures and creep");
  cmd->add_option("--hours", a->hours, fmt::format("Simulated hours of traffic, above 0 and at most {}",
                                                   max_workload_hours))->capture_default_str();
  cmd->add_option("--headroom", a->headroom,
                  fmt::format("Device size as a multiple of the workload's peak live bytes, from 1 to {}",
                              max_soak_headroom))->capture_default_str();
  cmd->add_option("--policy,-p", a->policies, "Comma-separated policies, or 'all'")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed of the workload")->check(whole_number)->capture_default_str();
  cmd->add_flag("--json", a->json, "Print one JSON object with a result per policy");
  cmd->callback([a] { run_soak_command(*a); });
}

}  // namespace vram::cli
