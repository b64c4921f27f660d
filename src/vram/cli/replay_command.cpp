// `vram replay TRACE... --policy P1,P2 [--device D] [--json]`: one row per trace x policy, side by side; the
// first failed allocation of each row under the table; exit status 3 when any allocation failed.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <vector>

#include "vram/cli/commands.hpp"
#include "vram/cli/progress.hpp"
#include "vram/core/size.hpp"
#include "vram/device/device_spec.hpp"
#include "vram/replay/replay.hpp"
#include "vram/report/replay_report.hpp"
#include "vram/policies/registry.hpp"
#include "vram/cli/trace_inputs.hpp"
#include "vram/cli/trace_warnings.hpp"
#include "vram/trace/trace_io.hpp"

namespace vram::cli {

namespace {

struct replay_args {
  std::vector<std::string> traces;
  std::string policies = "all";
  std::string device = "auto";
  bool json = false;
  bool validate = false;
  bool allow_failures = false;
  bool counters = false;
  read_options read;
};

void run_replay(const replay_args& a) {
  const auto policies = parse_policy_list(a.policies);
  check_policy_settings(policies);  // a bad setting fails before the device opens and says nothing else
  check_inputs(a.traces);  // a missing second file fails before the first is replayed
  const auto spec = parse_device_spec(a.device);
  progress_line progress;
  std::vector<replay_result> results;
  bool noted = false;
  // What the reader inferred, by row: by the trace's name, a snapshot's notes went to another file's trace
  // of the same name (late_start.csv beside late_start.pickle).
  std::vector<std::vector<std::string>> trace_notes;
  for (const auto& path : a.traces) {
    progress.show(fmt::format("reading {}", path));
    for (const trace& t : read_input(path, a.read)) {
      if (const std::string warnings = replay_warnings(path, t); !warnings.empty()) {
        progress.clear();
        std::cerr << warnings;
      }
      for (const auto& policy : policies) {
        progress.show(fmt::format("replaying {} ({} events) with {}", t.name, t.events.size(), policy));
        auto choice = open_device(spec);
        if (!choice.note.empty() && !noted && !a.json) {
          progress.clear();
          std::cerr << choice.note << '\n';
          noted = true;
        }
        auto resource = make_resource(policy, *choice.dev);
        replay_options o;
        o.validate_each_step = a.validate;
        std::size_t shown = 0;  // the percentage on the line
        o.progress = [&](std::size_t done, std::size_t total) {
          if (const std::size_t percent = done * 100 / total; percent != shown) {
            shown = percent;
            progress.show(fmt::format("replaying {} ({} events) with {}: {}%", t.name, total, policy, percent));
          }
        };
        results.push_back(replay(t, *resource, o));
        results.back().policy = policy;  // with its settings, as given: "vram:max_handle=16MiB" is not "vram"
        trace_notes.push_back(t.notes);
      }
    }
  }
  progress.clear();
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t i = 0; i < results.size(); ++i) {
      auto j = to_json(results[i]);
      if (!trace_notes[i].empty()) j["trace_notes"] = trace_notes[i];
      out.push_back(std::move(j));
    }
    std::cout << out.dump(2) << '\n';
  } else {
    std::cout << format_replay_table(results);
    // What a reader cannot tell from the columns alone, for the rows at hand.
    const auto any = [&](auto&& pred) { return std::any_of(results.begin(), results.end(), pred); };
    if (any([](const replay_result& r) { return r.policy.rfind("rmm-pool", 0) == 0; }))
      std::cout << "rmm-pool: RMM's pool takes its initial pool, half the device by default, at the first "
                   "allocation: its peak reserved is that, whatever the trace holds.\n";
    if (any([](const replay_result& r) { return r.recorded_peak_reserved_bytes.has_value(); }))
      std::cout << "recorded: the recorded allocator's peak, from the trace's segment rows; a CSV lacks the segments "
                   "made before its recording began (PyTorch's shared traces lack one 2 MiB small segment), a "
                   "snapshot's reader adds them (see its notes).\n";
    std::cout << "Mev/s: millions of trace events replayed per CPU second.\n";
    if (a.counters)
      std::cout << "\nDriver calls by kind, and each allocator's own counters (those at 0 left out):\n"
                << format_replay_counters(results);
    for (const auto& r : results) {
      if (!r.first_failure_event) continue;
      std::cout << fmt::format("first failure: {} under {}: event {} at {}, {} of {} allocations failed, "
                               "{:.1f}% of the device free then\n",
                               r.trace, r.policy, *r.first_failure_event + 1, format_duration(r.first_failure_time_s),
                               r.failed_allocations, r.allocations, 100.0 * r.free_share_at_first_failure);
    }
  }
  const bool failed = std::any_of(results.begin(), results.end(), [](const replay_result& r) { return r.failed_allocations > 0; });
  if (failed && !a.allow_failures) finished_status = status_allocations_failed;
}

}  // namespace

void add_replay_command(CLI::App& app) {
  auto a = std::make_shared<replay_args>();
  auto* cmd = app.add_subcommand("replay", "Replay traces against allocators on a device and measure memory and time");
  cmd->add_option("traces", a->traces,
                  "Trace files (PyTorch CSV or memory snapshot, RMM log CSV or vram format; .gz or plain)")
      ->required();
  add_device_index_option(cmd, a->read);
  cmd->add_option("--policy,-p", a->policies, "Comma-separated policies, or 'all'")->capture_default_str();
  cmd->add_option("--device,-d", a->device, device_help)
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print a JSON array, one object per trace x policy");
  cmd->add_flag("--validate", a->validate, "Check the allocator's invariants after every event (slow)");
  cmd->add_flag("--counters", a->counters,
                "Under the table, each row's driver calls by kind and its allocator's own counters (in --json: "
                "device_calls and allocator_counters)");
  cmd->add_flag("--allow-failures", a->allow_failures,
                "Exit 0 even when allocations failed (by default such a replay exits 3)");
  cmd->callback([a] { run_replay(*a); });
}

}  // namespace vram::cli
