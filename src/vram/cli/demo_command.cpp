// `vram demo`: the synthetic workloads against every allocator, side by side, on the simulated device
// (or the device --device names), with a line under the table on what each row shows.
#include <fmt/format.h>

#include <iostream>

#include "vram/cli/commands.hpp"
#include "vram/cli/progress.hpp"
#include "vram/device/device_spec.hpp"
#include "vram/replay/replay.hpp"
#include "vram/report/replay_report.hpp"
#include "vram/policies/registry.hpp"
#include "vram/workload/workload.hpp"

namespace vram::cli {

namespace {

struct demo_args {
  std::string device = "auto";
  double hours = 2.0;
  bool json = false;
};

std::string explain(const replay_result& r) {
  std::string s = fmt::format("{} on {}: reserved {:.2f}x the live peak", r.policy, r.trace, r.reserved_over_live);
  if (r.external_fragmentation > 0.005)
    s += fmt::format(", {:.0f}% of its free memory outside the largest free block", 100.0 * r.external_fragmentation);
  if (r.internal_fragmentation > 0.005) s += fmt::format(", {:.0f}% of live blocks lost to rounding", 100.0 * r.internal_fragmentation);
  const auto calls = r.device_calls.total_calls();
  s += fmt::format(", {} driver call{} ({:.3f} s modelled)", calls, calls == 1 ? "" : "s", r.modelled_driver_seconds);
  if (r.failed_allocations > 0)
    s += fmt::format(", {} failed allocation{}", r.failed_allocations, r.failed_allocations == 1 ? "" : "s");
  return s;
}

void run_demo(const demo_args& a) {
  workload_options wo;
  wo.hours = a.hours;
  check_workload_options(wo);  // before the device's note, so that a bad --hours says one line
  const auto spec = parse_device_spec(a.device);
  progress_line progress;
  std::vector<replay_result> results;
  bool noted = false;
  for (const auto& w : workloads()) {
    progress.show(fmt::format("making workload {}", w.name));
    const trace t = w.make(wo);
    for (const auto& p : policies()) {
      progress.show(fmt::format("replaying {} ({} events) with {}", w.name, t.events.size(), p.name));
      auto choice = open_device(spec);
      if (!choice.note.empty() && !noted && !a.json) {
        progress.clear();
        std::cerr << choice.note << '\n';
        noted = true;
      }
      auto resource = p.make(*choice.dev, {});
      results.push_back(replay(t, *resource));
    }
  }
  progress.clear();
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : results) out.push_back(to_json(r));
    std::cout << out.dump(2) << '\n';
    return;
  }
  std::cout << "vram demo: synthetic workloads replayed against each allocator\n\n";
  for (const auto& w : workloads()) std::cout << fmt::format("  {:<12} {}\n", w.name, w.summary);
  std::cout << '\n';
  for (const auto& p : policies()) std::cout << fmt::format("  {:<17} {}\n", p.name, p.summary);
  std::cout << '\n' << format_replay_table(results) << '\n';
  std::cout << "What each row shows:\n";
  for (const auto& r : results) std::cout << "  " << explain(r) << '\n';
  std::cout << "\nColumns: peak live = most bytes the program held at once; peak reserved = most bytes the allocator held "
               "from the device; res/live = their ratio (1.000 is perfect); mean r/l = the ratio averaged over time; "
               "int frag = rounding waste at peak; ext frag = 1 - largest free block / free memory inside the allocator "
               "at peak; drv = driver calls and their modelled time (from H200 measurements).\n";
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto a = std::make_shared<demo_args>();
  auto* cmd = app.add_subcommand("demo", "Run the synthetic workloads against every allocator and compare them");
  cmd->add_option("--device,-d", a->device, device_help)->capture_default_str();
  cmd->add_option("--hours", a->hours, "Hours of simulated traffic for the inference workload")->capture_default_str();
  cmd->add_flag("--json", a->json, "Print a JSON array, one object per workload x policy");
  cmd->callback([a] { run_demo(*a); });
}

}  // namespace vram::cli
