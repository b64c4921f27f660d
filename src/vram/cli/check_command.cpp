// `vram check TRACE... [--json]`: reads traces and reports their size, span and whether every free matches
// an allocation; exits 1 when a free does not match (a double free, a free of an address never allocated).
#include <fmt/format.h>

#include <iostream>

#include <nlohmann/json.hpp>

#include "vram/cli/commands.hpp"
#include "vram/cli/trace_inputs.hpp"
#include "vram/cli/trace_warnings.hpp"
#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/replay/replay.hpp"
#include "vram/report/table.hpp"
#include "vram/trace/trace_check.hpp"
#include "vram/trace/trace_io.hpp"

namespace vram::cli {

namespace {

struct check_args {
  std::vector<std::string> traces;
  read_options read;
  bool json = false;
};

void run_check(const check_args& a) {
  check_inputs(a.traces);  // a missing second file fails before the first is read (and its notes printed)
  text_table table({"trace", "events", "allocs", "span", "recorded peak", "unmatched", "double", "dup allocs", "wrong size",
                    "live at end"});
  nlohmann::json out = nlohmann::json::array();
  std::string problems;
  for (const auto& path : a.traces) {
    for (const trace& t : read_input(path, a.read)) {
      const trace_check c = check_trace(t);
      std::uint64_t allocs = 0;
      for (const auto& e : t.events) allocs += e.action == trace_action::alloc;
      const auto recorded = recorded_peak_reserved(t);
      table.add_row({t.name, fmt::format("{}", t.events.size()), fmt::format("{}", allocs), format_duration(t.seconds()),
                     recorded ? format_bytes(*recorded) : "-", fmt::format("{}", c.unmatched_frees),
                     fmt::format("{}", c.double_frees), fmt::format("{}", c.duplicate_allocs), fmt::format("{}", c.wrong_size_frees),
                     fmt::format("{}", c.live_at_end)});
      out.push_back({{"trace", t.name},
                     {"path", path},
                     {"events", t.events.size()},
                     {"allocations", allocs},
                     {"trace_seconds", t.seconds()},
                     {"recorded_peak_reserved_bytes", recorded ? nlohmann::json(*recorded) : nlohmann::json(nullptr)},
                     {"unmatched_frees", c.unmatched_frees},
                     {"double_frees", c.double_frees},
                     {"duplicate_allocs", c.duplicate_allocs},
                     {"wrong_size_frees", c.wrong_size_frees},
                     {"live_at_end", c.live_at_end},
                     {"clean", c.clean()},
                     {"notes", t.notes}});
      problems += describe_problems(path, t, c);
    }
  }
  if (a.json) std::cout << out.dump(2) << '\n';
  else std::cout << table.str();
  if (!problems.empty()) throw input_error(problems + "the trace's frees and allocations do not match (see above)");
}

}  // namespace

void add_check_command(CLI::App& app) {
  auto a = std::make_shared<check_args>();
  auto* cmd = app.add_subcommand("check", "Read traces and check that every free matches an allocation");
  cmd->add_option("traces", a->traces, "Trace files or PyTorch snapshots")->required();
  add_device_index_option(cmd, a->read);
  cmd->add_flag("--json", a->json, "Print a JSON array, one object per trace");
  cmd->callback([a] { run_check(*a); });
}

}  // namespace vram::cli
