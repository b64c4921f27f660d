// `vram probe [--device D] [--json] [--step SIZE] [--no-total]`: how much memory can be allocated now on
// the device, as the largest single block (searched to the granularity, and the classic halving search
// beside it) and in all, with the fragmentation that follows (src/vram/device/probe.hpp).
// `vram probe --snapshot FILE [--json]`: the same questions of a vram pool's snapshot, from its free ranges.
// `vram probe --costs FILE.json [--rounds N] [--json]`: the device's own cost of every driver call, by size, written
// as a cost model that `--device sim:costs=FILE.json` replays with (src/vram/device/cost_probe.hpp).
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include <nlohmann/json.hpp>

#include "vram/cli/commands.hpp"
#include "vram/cli/progress.hpp"
#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/device_spec.hpp"
#include "vram/device/cost_probe.hpp"
#include "vram/device/probe.hpp"
#include "vram/trace/file_io.hpp"

namespace vram::cli {

namespace {

struct probe_args {
  std::string device = "auto";
  std::string snapshot;
  std::string step;
  std::string costs;
  unsigned rounds = 16;
  bool no_total = false;
  bool json = false;
};

std::string bytes_text(std::size_t b) { return fmt::format("{} ({} bytes)", format_bytes(b), b); }
std::string tries_text(unsigned n) { return fmt::format("{} {}", n, n == 1 ? "try" : "tries"); }
void line(std::string_view key, const std::string& value) { std::cout << fmt::format("{:<32}{}\n", key, value); }

void run_snapshot(const probe_args& a) {
  const free_ranges_summary s = read_snapshot_file(a.snapshot);
  if (a.json) {
    const auto text_or_null = [](const std::string& t) { return t.empty() ? nlohmann::json(nullptr) : nlohmann::json(t); };
    std::cout << nlohmann::json{{"snapshot", a.snapshot},
                                {"policy", text_or_null(s.policy)},
                                {"device", text_or_null(s.device)},
                                {"reserved_bytes", s.reserved_bytes},
                                {"free_ranges", s.ranges},
                                {"free_bytes", s.free_bytes},
                                {"largest_free_range_bytes", s.largest},
                                {"fragmentation", s.fragmentation}}
                     .dump(2)
              << '\n';
    return;
  }
  line("snapshot", a.snapshot);
  if (!s.policy.empty()) line("policy", s.policy);
  if (!s.device.empty()) line("device", s.device);
  if (s.reserved_bytes != 0) line("reserved", bytes_text(s.reserved_bytes));
  line("free inside the pool", fmt::format("{} in {} range{}", bytes_text(s.free_bytes), s.ranges, s.ranges == 1 ? "" : "s"));
  line("largest free range", bytes_text(s.largest));
  line("fragmentation", fmt::format("{:.1f}% (1 - largest / free)", 100.0 * s.fragmentation));
}

void run_costs(const probe_args& a) {
  if (!a.costs.ends_with(".json")) {
    throw usage_error(fmt::format("--costs {}: the file's name must end in .json, as --device sim:costs=FILE.json "
                                  "takes it", a.costs));
  }
  detail::check_writable(a.costs);  // before the work, not after it
  const device_choice choice = open_device(parse_device_spec(a.device));
  if (!choice.note.empty()) std::cerr << choice.note << '\n';
  cost_probe_options o;
  o.rounds = a.rounds;
  progress_line progress;
  o.progress = [&](std::string_view what) { progress.show(fmt::format("measuring {}", what)); };
  const cost_probe_result r = measure_costs(*choice.dev, o);
  progress.clear();

  const cost_model table = cost_model::h200();
  nlohmann::json samples = nlohmann::json::array();
  for (const cost_sample& c : r.samples) {
    samples.push_back({{"kind", to_string(c.kind)}, {"bytes", c.bytes}, {"calls", c.calls},
                       {"median_ns", c.median_ns}, {"min_ns", c.min_ns}, {"max_ns", c.max_ns},
                       {"table_ns", table.cost(c.kind, c.bytes)}});
  }
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& [kind, bytes] : r.skipped) skipped.push_back({{"kind", to_string(kind)}, {"bytes", bytes}});
  nlohmann::json j = r.model.to_json();
  j["format"] = "vram cost model";
  j["device"] = choice.dev->name();
  j["simulated"] = choice.dev->simulated();
  j["measured_at"] = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
  j["rounds"] = a.rounds;
  j["samples"] = samples;
  j["skipped"] = skipped;
  // Printed first, the file written last: a file that cannot be written after all (a full disk) loses no
  // measurement.
  if (a.json) {
    std::cout << j.dump(2) << '\n' << std::flush;
    detail::write_file_bytes(a.costs, j.dump(2) + "\n");
    return;
  }
  line("device", choice.dev->name());
  std::cout << fmt::format("\n{:<20}{:>10}{:>7}{:>12}{:>12}{:>12}{:>12}{:>8}\n", "call", "size", "calls", "median us",
                           "min us", "max us", "table us", "ratio");
  for (const cost_sample& c : r.samples) {
    const double t = static_cast<double>(table.cost(c.kind, c.bytes));
    std::cout << fmt::format("{:<20}{:>10}{:>7}{:>12.2f}{:>12.2f}{:>12.2f}{:>12.2f}{:>8}\n", to_string(c.kind),
                             c.bytes ? format_bytes(c.bytes) : "-", c.calls, c.median_ns / 1e3, c.min_ns / 1e3,
                             c.max_ns / 1e3, t / 1e3, t > 0 ? fmt::format("{:.2f}", c.median_ns / t) : "-");
  }
  for (const auto& [kind, bytes] : r.skipped) {
    std::cout << fmt::format("skipped {} at {}: not one fits in half the free memory\n", to_string(kind), format_bytes(bytes));
  }
  std::cout << "\nratio: the median over the shared H200 table's cost (the default model).\n" << std::flush;
  detail::write_file_bytes(a.costs, j.dump(2) + "\n");
  std::cout << fmt::format("Wrote {}: replay with this device's costs through --device sim:costs={}\n", a.costs, a.costs);
}

void run_probe(const probe_args& a) {
  if (!a.snapshot.empty()) return run_snapshot(a);
  if (!a.costs.empty()) return run_costs(a);
  const device_choice choice = open_device(parse_device_spec(a.device));
  probe_options o;
  if (!a.step.empty()) {
    o.step = parse_size(a.step);
    const std::size_t free = choice.dev->mem_info().free;
    if (o.step == 0 || o.step > free) {
      throw usage_error(fmt::format("probe: --step {} must be above 0 and at most the device's free memory, {}",
                                    a.step, format_bytes(free)));
    }
  }
  o.allocatable = !a.no_total;
  const probe_result r = probe(*choice.dev, o);
  if (a.json) {
    nlohmann::json j = {{"device", choice.dev->name()},
                        {"simulated", choice.dev->simulated()},
                        {"note", choice.note},
                        {"total_bytes", r.before.total},
                        {"free_bytes", r.before.free},
                        {"step_bytes", r.step},
                        {"largest_block", {{"bytes", r.largest.bytes}, {"tries", r.largest.tries}}},
                        {"halving", {{"bytes", r.halving.bytes}, {"tries", r.halving.tries}}},
                        {"fragmentation", r.fragmentation}};
    if (o.allocatable) {
      j["allocatable"] = {{"bytes", r.allocatable}, {"blocks", r.blocks}, {"tries", r.allocatable_tries}, {"capped", r.capped}};
    }
    std::cout << j.dump(2) << '\n';
    return;
  }
  if (!choice.note.empty()) std::cerr << choice.note << '\n';
  line("device", choice.dev->name());
  line("total memory", bytes_text(r.before.total));
  line("free memory (driver)", bytes_text(r.before.free));
  line("largest block", fmt::format("{}, {}, in steps of {}", bytes_text(r.largest.bytes),
                                                    tries_text(r.largest.tries), format_bytes(r.step)));
  line("halving search finds", fmt::format("{}, {} (total/2, total/4, ...)", bytes_text(r.halving.bytes),
                                              tries_text(r.halving.tries)));
  if (o.allocatable) {
    line("allocatable in all", fmt::format("{} in {} block{}, {}{}", bytes_text(r.allocatable), r.blocks,
                                           r.blocks == 1 ? "" : "s", tries_text(r.allocatable_tries), r.capped ? " (stopped at the block limit)" : ""));
  }
  line("fragmentation", fmt::format("{:.1f}% (1 - largest block / free memory)", 100.0 * r.fragmentation));
  if (r.halving.bytes < r.largest.bytes) {
    std::cout << fmt::format("\nHalving would have missed {} that one block can hold.\n",
                             format_bytes(r.largest.bytes - r.halving.bytes));
  }
}

}  // namespace

void add_probe_command(CLI::App& app) {
  auto a = std::make_shared<probe_args>();
  auto* cmd = app.add_subcommand("probe", "Find how much memory can be allocated now, in one block and in all");
  auto* device = cmd->add_option("--device,-d", a->device, device_help)->capture_default_str();
  auto* snapshot = cmd->add_option("--snapshot", a->snapshot, "Read a vram pool snapshot (JSON) instead of probing a device")
                       ->check(given_a_value);
  device->excludes(snapshot);
  auto* step = cmd->add_option("--step", a->step, "Unit of the binary search (default: the device's granularity), e.g. 2MiB")
                   ->check(given_a_value)
                   ->excludes(snapshot);
  auto* costs = cmd->add_option("--costs", a->costs, "Measure every driver call's cost by size and write the cost "
                                                   "model to FILE.json (for --device sim:costs=FILE.json)")
                    ->check(given_a_value)
                    ->excludes(snapshot);
  cmd->add_option("--rounds", a->rounds, "With --costs: calls of each kind at each size (the median is kept)")
      ->check(CLI::Range(1u, 1000u))
      ->needs(costs)
      ->capture_default_str();
  cmd->add_flag("--no-total", a->no_total, "Skip the allocatable total (which holds the memory for a moment)")
      ->excludes(snapshot)
      ->excludes(costs);
  step->excludes(costs);
  cmd->add_flag("--json", a->json, "Print a JSON object");
  cmd->callback([a] { run_probe(*a); });
}

}  // namespace vram::cli
