// The soak: the inference workload for many simulated hours, each policy on a device with little headroom.
// Design decisions:
//  - The peak live bytes come from replay() of the trace with cuda-direct (no pool, so nothing but the trace
//    decides them) on a 4 TiB simulated device, far above what the workload can reach.
//  - Each policy gets a fresh device and a fresh allocator; the driver loop below follows replay()'s rules and
//    keeps, besides the whole-run figures, the peak reserved bytes of each of soak_windows windows of equal
//    simulated time. A window's peak starts from the reserved bytes carried into it.
//  - The driver allocates no memory per event beyond the live-block map, reserved up front.
#include "vram/replay/soak.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/replay/replay.hpp"
#include "vram/policies/registry.hpp"
#include "vram/workload/workload.hpp"

namespace vram {

namespace detail {

constexpr std::size_t soak_device_unit = 2 * MiB;
constexpr std::size_t soak_reference_capacity = std::size_t{4} << 40;  // 4 TiB
constexpr std::string_view soak_reference_policy = "cuda-direct";
constexpr std::uint64_t soak_progress_every = std::uint64_t{1} << 18;  // events between progress calls

struct soak_block {
  device_ptr ptr;  // 0 when the allocation failed: its free is skipped
  std::uint64_t size;
  stream_id stream;
};

double hours_since(std::int64_t t_us, std::int64_t t0_us) { return static_cast<double>(t_us - t0_us) / 3.6e9; }

}  // namespace detail

void check_soak_options(const soak_options& o) {
  if (!std::isfinite(o.hours) || o.hours <= 0 || o.hours > max_workload_hours) {
    throw usage_error(fmt::format("soak: --hours {} must be a number of simulated hours above 0 and at most {}",
                                  o.hours, max_workload_hours));
  }
  if (!std::isfinite(o.headroom) || o.headroom < 1.0 || o.headroom > max_soak_headroom) {
    throw usage_error(fmt::format("soak: --headroom {} must be at least 1 and at most {} (the device is headroom x "
                                  "the workload's peak live bytes)",
                                  o.headroom, max_soak_headroom));
  }
  // An unknown name or a bad setting: usage_error, before the workload is made and any policy replayed.
  for (const auto& p : o.policies) check_policy_settings(parse_policy_list(p));
}

soak_policy_result soak_policy(const trace& t, std::string_view policy, const sim_device_options& device_options,
                               const std::function<void(double)>& progress) {
  sim_device dev(device_options);
  auto resource = make_resource(policy, dev);
  soak_policy_result r;
  r.policy = std::string(policy);

  const std::int64_t t0 = t.events.empty() ? 0 : t.events.front().time_us;
  const std::int64_t span = t.events.empty() ? 0 : t.events.back().time_us - t0;
  auto window_of = [&](std::int64_t time_us) -> std::size_t {
    if (span <= 0) return 0;
    return std::min<std::size_t>(soak_windows - 1,
                                 static_cast<std::size_t>((time_us - t0) * std::int64_t{soak_windows} / span));
  };

  detail::trace_time clock(dev, t0);
  std::unordered_map<std::uint64_t, detail::soak_block> live;
  live.reserve(4096);
  std::size_t live_bytes = 0;
  std::size_t reserved = resource->reserved_bytes();
  std::size_t window = 0;
  r.window_peak_reserved_bytes[0] = reserved;
  r.peak_reserved_bytes = reserved;

  auto release = [&](const detail::soak_block& b) {
    if (b.ptr == 0) return;
    resource->deallocate(b.ptr, b.size, b.stream);
    live_bytes -= b.size;
  };

  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    if (e.action != trace_action::alloc && e.action != trace_action::free_requested) continue;
    clock.at(e.time_us);
    // The state before this row was held into its window: carry it into every window entered since.
    for (const std::size_t w = window_of(e.time_us); window < w;) {
      ++window;
      r.window_peak_reserved_bytes[window] = reserved;
      r.window_peak_live_bytes[window] = live_bytes;
    }

    if (e.action == trace_action::alloc) {
      ++r.allocations;
      auto [it, fresh] = live.try_emplace(e.addr, detail::soak_block{0, e.size, e.stream});
      if (!fresh) {  // the previous block at this address was never freed in the trace
        release(it->second);
        it->second = detail::soak_block{0, e.size, e.stream};
      }
      const device_ptr p = e.size == 0 ? 0 : resource->try_allocate(e.size, e.stream);
      if (p == 0 && e.size != 0) {
        if (r.failed_allocations++ == 0) {
          r.first_failure_hours = detail::hours_since(e.time_us, t0);
          const memory_info info = dev.mem_info();
          r.free_share_at_first_failure =
              info.total == 0 ? 0.0 : static_cast<double>(info.free) / static_cast<double>(info.total);
        }
      } else {
        it->second.ptr = p;
        live_bytes += e.size;
        r.peak_live_bytes = std::max(r.peak_live_bytes, live_bytes);
        r.window_peak_live_bytes[window] = std::max(r.window_peak_live_bytes[window], live_bytes);
      }
    } else if (auto it = live.find(e.addr); it != live.end()) {
      release(it->second);
      live.erase(it);
    }

    reserved = resource->reserved_bytes();
    r.peak_reserved_bytes = std::max(r.peak_reserved_bytes, reserved);
    r.window_peak_reserved_bytes[window] = std::max(r.window_peak_reserved_bytes[window], reserved);
    if (progress && i % detail::soak_progress_every == 0) progress(detail::hours_since(e.time_us, t0));
  }
  // A run whose last rows fall short of the last windows held its final state through them.
  while (window + 1 < soak_windows) {
    ++window;
    r.window_peak_reserved_bytes[window] = reserved;
    r.window_peak_live_bytes[window] = live_bytes;
  }

  r.final_reserved_bytes = resource->reserved_bytes();
  const std::size_t first = r.window_peak_reserved_bytes.front();
  r.creep = first == 0 ? 0.0 : static_cast<double>(r.window_peak_reserved_bytes.back()) / static_cast<double>(first);
  const std::size_t first_live = r.window_peak_live_bytes.front();
  r.live_creep =
      first_live == 0 ? 0.0 : static_cast<double>(r.window_peak_live_bytes.back()) / static_cast<double>(first_live);
  return r;
}

soak_report run_soak(const soak_options& options) {
  check_soak_options(options);
  std::vector<std::string> policies;
  if (options.policies.empty()) {
    for (const auto& p : vram::policies()) policies.emplace_back(p.name);
  } else {
    for (const auto& list : options.policies)
      for (auto& p : parse_policy_list(list)) policies.push_back(std::move(p));
  }

  workload_options w;
  w.seed = options.seed;
  w.hours = options.hours;
  const trace t = make_inference_workload(w);

  soak_report report;
  report.hours = options.hours;
  report.seed = options.seed;
  report.headroom = options.headroom;
  report.events = t.events.size();
  {
    sim_device_options large;
    large.capacity = detail::soak_reference_capacity;
    large.label = "simulated reference device";
    sim_device dev(large);
    auto reference = make_resource(detail::soak_reference_policy, dev);
    const replay_result ref = replay(t, *reference);
    if (ref.failed_allocations != 0) {
      throw error(fmt::format("soak: the workload does not fit on the {} reference device ({} failed allocations)",
                              format_bytes(large.capacity), ref.failed_allocations));
    }
    report.peak_live_bytes = ref.peak_live_bytes;
  }
  const double device = std::ceil(options.headroom * static_cast<double>(report.peak_live_bytes));
  report.device_bytes = round_up(static_cast<std::size_t>(device), detail::soak_device_unit);

  sim_device_options dev_options;
  dev_options.capacity = report.device_bytes;
  dev_options.label = fmt::format("simulated soak device ({:.3g} x peak live)", options.headroom);
  for (const auto& policy : policies) {
    std::function<void(double)> step;
    if (options.progress) step = [&](double done) { options.progress(policy, done, options.hours); };
    report.results.push_back(soak_policy(t, policy, dev_options, step));
  }
  return report;
}

nlohmann::json to_json(const soak_report& report) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& r : report.results) {
    results.push_back({
        {"policy", r.policy},
        {"failed", r.failed()},
        {"allocations", r.allocations},
        {"failed_allocations", r.failed_allocations},
        {"first_failure_hours", r.first_failure_hours ? nlohmann::json(*r.first_failure_hours) : nlohmann::json()},
        {"free_share_at_first_failure",
         r.free_share_at_first_failure ? nlohmann::json(*r.free_share_at_first_failure) : nlohmann::json()},
        {"peak_reserved_bytes", r.peak_reserved_bytes},
        {"peak_reserved_over_live",
         report.peak_live_bytes == 0
             ? 0.0
             : static_cast<double>(r.peak_reserved_bytes) / static_cast<double>(report.peak_live_bytes)},
        {"window_peak_reserved_bytes", r.window_peak_reserved_bytes},
        {"window_peak_live_bytes", r.window_peak_live_bytes},
        {"creep", r.creep},
        {"live_creep", r.live_creep},
        {"final_reserved_bytes", r.final_reserved_bytes},
    });
  }
  return {{"workload", report.workload},   {"hours", report.hours},
          {"seed", report.seed},           {"events", report.events},
          {"peak_live_bytes", report.peak_live_bytes}, {"headroom", report.headroom},
          {"device_bytes", report.device_bytes},       {"windows", soak_windows},
          {"results", results}};
}

}  // namespace vram
