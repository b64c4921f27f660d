// JSON and table forms of replay results.
#include "vram/report/replay_report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vram/core/size.hpp"
#include "vram/report/table.hpp"

namespace vram {

nlohmann::json to_json(const replay_result& r) {
  nlohmann::json calls = nlohmann::json::object();
  nlohmann::json call_seconds = nlohmann::json::object();
  for (std::size_t k = 0; k < device_call_kinds; ++k) {
    if (r.device_calls.count[k] == 0) continue;
    const auto name = std::string(to_string(static_cast<device_call>(k)));
    calls[name] = r.device_calls.count[k];
    call_seconds[name] = static_cast<double>(r.device_calls.nanoseconds[k]) * 1e-9;
  }
  nlohmann::json j = {
      {"trace", r.trace},
      {"policy", r.policy},
      {"events", r.events},
      {"allocations", r.allocations},
      {"peak_live_bytes", r.peak_live_bytes},
      {"peak_reserved_bytes", r.peak_reserved_bytes},
      {"peak_allocated_bytes", r.peak_allocated_bytes},
      {"final_reserved_bytes", r.final_reserved_bytes},
      {"reserved_over_live", r.reserved_over_live},
      {"mean_reserved_over_live", r.mean_reserved_over_live},
      {"internal_fragmentation", r.internal_fragmentation},
      {"external_fragmentation", r.external_fragmentation},
      {"failed_allocations", r.failed_allocations},
      {"unmatched_frees", r.unmatched_frees},
      {"recorded_peak_reserved_bytes", nullptr},
      {"trace_seconds", r.trace_seconds},
      {"device_calls", calls},
      {"device_call_seconds", call_seconds},
      {"modelled_driver_seconds", r.modelled_driver_seconds},
      {"driver_share_of_trace", r.trace_seconds > 0 ? r.modelled_driver_seconds / r.trace_seconds : 0.0},
      {"warmup_trace_seconds", r.warmup_trace_seconds},
      {"warmup_driver_seconds", r.warmup_driver_seconds},
      // Calls in which the host waits for the device: stream, event and device synchronizations.
      {"synchronizations", r.device_calls.calls(device_call::stream_synchronize) +
                               r.device_calls.calls(device_call::event_synchronize) +
                               r.device_calls.calls(device_call::device_synchronize)},
      {"replay_seconds", r.replay_seconds},
      {"replay_cpu_seconds", r.replay_cpu_seconds},
      {"peak_device_used_bytes", r.peak_device_used_bytes},
      {"events_per_second", r.events_per_second},
      {"cpu_ns_per_event", r.cpu_ns_per_event},
  };
  nlohmann::json counters = nlohmann::json::object();
  for (const auto& [name, n] : r.allocator_counters) counters[name] = n;
  j["allocator_counters"] = counters;
  if (r.recorded_peak_reserved_bytes) j["recorded_peak_reserved_bytes"] = *r.recorded_peak_reserved_bytes;
  if (r.first_failure_event) {
    j["first_failure"] = {{"event", *r.first_failure_event},
                          {"trace_time_seconds", r.first_failure_time_s},
                          {"device_free_share", r.free_share_at_first_failure}};
  }
  return j;
}

std::string format_replay_counters(const std::vector<replay_result>& results) {
  std::size_t trace_w = 5, policy_w = 6;
  for (const auto& r : results) {
    trace_w = std::max(trace_w, r.trace.size());
    policy_w = std::max(policy_w, r.policy.size());
  }
  std::string out;
  for (const auto& r : results) {
    std::string calls, counters;
    for (std::size_t k = 0; k < device_call_kinds; ++k) {
      if (r.device_calls.count[k] == 0) continue;
      calls += fmt::format("{}{} {}", calls.empty() ? "" : ", ", to_string(static_cast<device_call>(k)),
                           r.device_calls.count[k]);
    }
    for (const auto& [name, n] : r.allocator_counters)
      if (n != 0) counters += fmt::format("{}{} {}", counters.empty() ? "" : ", ", name, n);
    out += fmt::format("{:<{}}  {:<{}}  calls     {}\n", r.trace, trace_w, r.policy, policy_w,
                       calls.empty() ? "none" : calls);
    out += fmt::format("{:<{}}  {:<{}}  counters  {}\n", "", trace_w, "", policy_w,
                       r.allocator_counters.empty() ? "(the allocator keeps none)" : counters.empty() ? "all 0" : counters);
  }
  return out;
}

std::string format_replay_table(const std::vector<replay_result>& results,
                                const std::vector<std::optional<std::size_t>>& fits) {
  std::vector<std::string> header{"trace",      "policy",    "events",     "peak live", "peak reserved",
                                  "res/live",   "mean r/l",  "int frag",   "ext frag",  "failed",
                                  "recorded",   "drv calls", "drv time",   "drv/trace", "Mev/s"};
  if (!fits.empty()) header.insert(header.begin() + 5, "fit");
  text_table table(std::move(header), 2);  // trace, policy
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    std::vector<std::string> row{
        r.trace,
        r.policy,
        fmt::format("{}", r.events),
        format_bytes(r.peak_live_bytes),
        format_bytes(r.peak_reserved_bytes),
        fmt::format("{:.3f}", r.reserved_over_live),
        fmt::format("{:.3f}", r.mean_reserved_over_live),
        fmt::format("{:.1f}%", 100.0 * r.internal_fragmentation),
        fmt::format("{:.1f}%", 100.0 * r.external_fragmentation),
        fmt::format("{}", r.failed_allocations),
        r.recorded_peak_reserved_bytes ? format_bytes(*r.recorded_peak_reserved_bytes) : "-",
        fmt::format("{}", r.device_calls.total_calls()),
        fmt::format("{:.3f} s", r.modelled_driver_seconds),
        r.trace_seconds > 0 ? fmt::format("{:.2f}%", 100.0 * r.modelled_driver_seconds / r.trace_seconds) : "-",
        fmt::format("{:.2f}", r.events_per_second * 1e-6),
    };
    if (!fits.empty()) row.insert(row.begin() + 5, fits[i] ? format_bytes(*fits[i]) : "none");
    table.add_row(std::move(row));
  }
  return table.str();
}

}  // namespace vram
