// `vram fit TRACE... --policy P1,P2 [--device sim:MAX] [--json]`: the smallest simulated device, to the
// granule, on which each trace replays with no failed allocation.
#include <fmt/format.h>

#include <iostream>

#include "vram/cli/commands.hpp"
#include "vram/cli/progress.hpp"
#include "vram/cli/trace_inputs.hpp"
#include "vram/cli/trace_warnings.hpp"
#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/device_spec.hpp"
#include "vram/replay/fit.hpp"
#include "vram/report/replay_report.hpp"
#include "vram/policies/registry.hpp"
#include "vram/trace/trace_io.hpp"

namespace vram::cli {

namespace {

struct fit_args {
  std::vector<std::string> traces;
  std::string policies = "all";
  std::string device = "sim";
  long long verify = static_cast<long long>(fit_options{}.verify_granules);
  bool json = false;
  read_options read;
};

void run_fit(const fit_args& a) {
  const auto policies = parse_policy_list(a.policies);
  check_policy_settings(policies);  // a bad setting of the last policy fails before the first one's search
  check_inputs(a.traces);  // a missing second file fails before the first is replayed
  const auto spec = parse_device_spec(a.device);
  if (spec.which == device_spec::kind::cuda) throw usage_error("vram fit runs on the simulated device: use --device sim[:MAX]");
  fit_options options;
  options.device = sim_options(spec);
  constexpr long long most_verified = 64;
  if (a.verify < 0 || a.verify > most_verified)
    throw usage_error(fmt::format("bad --verify {}: from 0 to {} granules", a.verify, most_verified));
  options.verify_granules = static_cast<std::size_t>(a.verify);
  progress_line progress;
  std::vector<replay_result> results;
  std::vector<std::optional<std::size_t>> fits;
  std::vector<std::string> notes;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& path : a.traces) {
    progress.show(fmt::format("reading {}", path));
    for (const trace& t : read_input(path, a.read)) {
      // As replay's: each probe replays the trace, skipping the frees that match nothing.
      if (const std::string warnings = replay_warnings(path, t); !warnings.empty()) {
        progress.clear();
        std::cerr << warnings;
      }
      for (const auto& policy : policies) {
        options.progress = [&](int probe, std::size_t capacity, bool fits_here) {
          // In whole MiB: two probes a granule apart would read alike in GiB with two decimals.
          progress.show(fmt::format("fit {} with {}: probe {} at {} MiB {}", t.name, policy, probe, capacity / MiB,
                                    fits_here ? "fits" : "fails"));
        };
        const fit_result f = fit(t, policy, options);
        auto j = to_json(f.replay);
        j["fit_bytes"] = f.fit_bytes ? nlohmann::json(*f.fit_bytes) : nlohmann::json(nullptr);
        j["fit_over_live"] = f.fit_bytes && f.replay.peak_live_bytes > 0
                                 ? nlohmann::json(static_cast<double>(*f.fit_bytes) /
                                                  static_cast<double>(f.replay.peak_live_bytes))
                                 : nlohmann::json(nullptr);
        j["fit_probes"] = f.probes;
        j["fit_monotone"] = f.monotone;
        j["lowest_fit_bytes"] = f.lowest_fit_bytes ? nlohmann::json(*f.lowest_fit_bytes) : nlohmann::json(nullptr);
        if (!f.monotone)
          notes.push_back(fmt::format("{} with {}: fits on {} ({} granules) but fails on a larger device; the fit "
                                      "given, {} ({} granules), is above every failure seen, and the {} granules above "
                                      "it fit too",
                                      t.name, policy, format_bytes(*f.lowest_fit_bytes),
                                      *f.lowest_fit_bytes / options.device.granularity, format_bytes(*f.fit_bytes),
                                      *f.fit_bytes / options.device.granularity, options.verify_granules));
        j["max_device_bytes"] = options.device.capacity;
        if (!t.notes.empty()) j["trace_notes"] = t.notes;
        out.push_back(std::move(j));
        results.push_back(f.replay);
        fits.push_back(f.fit_bytes);
      }
    }
  }
  progress.clear();
  if (a.json) {
    std::cout << out.dump(2) << '\n';
  } else {
    std::cout << format_replay_table(results, fits);
    std::cout << fmt::format("fit: the smallest simulated device (to {}) on which the trace replays with no failed "
                             "allocation; the other columns are the replay on a device of that size.\n",
                             format_bytes(options.device.granularity));
    for (const auto& n : notes) std::cout << "not monotone: " << n << ".\n";
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (fits[i]) continue;
      std::cout << fmt::format("does not fit: {} with {} fails even on the largest device tried, {} (--device "
                               "sim:MAX tries a larger one); its row is that replay, up to its first failed "
                               "allocation.\n",
                               results[i].trace, results[i].policy, format_bytes(options.device.capacity));
    }
  }
  // As replay's: a trace that fits on no device tried ends with the status of failed allocations.
  for (const auto& f : fits)
    if (!f) finished_status = status_allocations_failed;
}

}  // namespace

void add_fit_command(CLI::App& app) {
  auto a = std::make_shared<fit_args>();
  auto* cmd = app.add_subcommand("fit", "Find the smallest device each trace fits on, per allocator");
  cmd->add_option("traces", a->traces, "Trace files or PyTorch snapshots")->required();
  add_device_index_option(cmd, a->read);
  cmd->add_option("--policy,-p", a->policies, "Comma-separated policies, or 'all'")->capture_default_str();
  cmd->add_option("--device,-d", a->device, "sim or sim:MAX: the largest device to try (default an H200)")
      ->capture_default_str();
  cmd->add_option("--verify", a->verify,
                  "Granules above the answer that must fit too (a failure there moves the answer up), 0 to 64; "
                  "0: trust the binary search")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print a JSON array, one object per trace x policy, with fit_bytes");
  cmd->callback([a] { run_fit(*a); });
}

}  // namespace vram::cli
