// Measuring a device's call costs (see cost_probe.hpp). Decisions:
//  - each call's time is the growth of its kind's nanoseconds in device::calls() across it, so the probe
//    measures what replays measure, the same way, on a GPU and on the simulated device alike;
//  - medians, not means: a GPU's first call of a kind can take many times the rest (lazy set-up in the driver);
//  - handles of a round are all created before any is mapped, and all unmapped before any is released, as a
//    pool grows and trims, so a create never reuses the memory of a release just made.
#include "vram/device/cost_probe.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "vram/core/error.hpp"

namespace vram {
namespace {

class sampler {
 public:
  explicit sampler(device& dev) : dev_(dev) {}

  // Runs fn (one call of @p kind) and keeps its time under (kind, bytes).
  template <class F>
  auto time(device_call kind, std::size_t bytes, F&& fn) {
    const auto k = static_cast<std::size_t>(kind);
    const std::uint64_t before = dev_.calls().nanoseconds[k];
    if constexpr (std::is_void_v<decltype(fn())>) {
      fn();
      times_[{kind, bytes}].push_back(static_cast<double>(dev_.calls().nanoseconds[k] - before));
    } else {
      auto r = fn();
      times_[{kind, bytes}].push_back(static_cast<double>(dev_.calls().nanoseconds[k] - before));
      return r;
    }
  }

  cost_probe_result result() const {
    cost_probe_result r;
    r.model = cost_model::zero();
    std::map<device_call, std::vector<std::pair<std::size_t, double>>> curves;
    for (auto [key, t] : times_) {
      std::sort(t.begin(), t.end());
      const std::size_t n = t.size();
      const double median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2.0;
      r.samples.push_back({key.first, key.second, static_cast<unsigned>(n), median, t.front(), t.back()});
      curves[key.first].emplace_back(std::max<std::size_t>(key.second, 1), median);
    }
    for (auto& [kind, points] : curves) r.model.curves[static_cast<std::size_t>(kind)] = cost_curve(std::move(points));
    return r;
  }

 private:
  device& dev_;
  std::map<std::pair<device_call, std::size_t>, std::vector<double>> times_;  // sorted by kind, then size
};

// How many blocks of @p bytes to take at once: at most @p rounds, in at most half the free memory.
unsigned fitting(device& dev, std::size_t bytes, unsigned rounds) {
  const std::size_t half = dev.mem_info().free / 2;
  return static_cast<unsigned>(std::min<std::size_t>(rounds, half / bytes));
}

void handle_round(device& dev, sampler& s, std::size_t bytes, unsigned n) {
  using enum device_call;
  std::vector<device_ptr> spaces;
  for (unsigned i = 0; i < n; ++i) spaces.push_back(s.time(address_reserve, bytes, [&] { return dev.address_reserve(bytes); }));
  for (device_ptr va : spaces) s.time(address_free, bytes, [&] { dev.address_free(va, bytes); });

  std::vector<phys_handle> handles;
  for (unsigned i = 0; i < n; ++i) {
    const phys_handle h = s.time(mem_create, bytes, [&] { return dev.mem_create(bytes); });
    if (h == 0) break;  // the device had less than mem_info said: measure what was had
    handles.push_back(h);
  }
  if (handles.empty()) return;
  const std::size_t span = bytes * handles.size();
  const device_ptr va = dev.address_reserve(span);
  for (std::size_t i = 0; i < handles.size(); ++i) s.time(mem_map, bytes, [&] { dev.mem_map(va + i * bytes, bytes, handles[i]); });
  for (std::size_t i = 0; i < handles.size(); ++i) s.time(set_access, bytes, [&] { dev.set_access(va + i * bytes, bytes); });
  for (std::size_t i = 0; i < handles.size(); ++i) s.time(mem_unmap, bytes, [&] { dev.mem_unmap(va + i * bytes, bytes); });
  for (phys_handle h : handles) s.time(mem_release, bytes, [&] { dev.mem_release(h); });
  dev.address_free(va, span);
}

void legacy_round(device& dev, sampler& s, std::size_t bytes, unsigned n) {
  std::vector<device_ptr> blocks;
  for (unsigned i = 0; i < n; ++i) {
    const device_ptr p = s.time(device_call::legacy_malloc, bytes, [&] { return dev.legacy_malloc(bytes); });
    if (p == 0) break;
    blocks.push_back(p);
  }
  for (device_ptr p : blocks) s.time(device_call::legacy_free, bytes, [&] { dev.legacy_free(p); });
}

}  // namespace

cost_probe_result measure_costs(device& dev, const cost_probe_options& o) {
  if (o.rounds == 0) throw usage_error("cost probe: rounds must be at least 1");
  if (o.handle_sizes.empty() && o.legacy_sizes.empty()) throw usage_error("cost probe: no sizes to measure");
  for (std::size_t b : o.handle_sizes) {
    if (b == 0 || b % dev.granularity() != 0) {
      throw usage_error(fmt::format("cost probe: handle size {} is not a multiple of the granularity ({})",
                                    format_bytes(b), format_bytes(dev.granularity())));
    }
  }
  for (std::size_t b : o.legacy_sizes) {
    if (b == 0) throw usage_error("cost probe: a legacy size must be positive");
  }
  auto tell = [&](std::string_view what, std::size_t bytes) {
    if (o.progress) o.progress(bytes ? fmt::format("{} {}", what, format_bytes(bytes)) : std::string(what));
  };
  sampler s(dev);
  std::vector<std::pair<device_call, std::size_t>> skipped;
  for (std::size_t b : o.handle_sizes) {
    tell("handles of", b);
    const unsigned n = fitting(dev, b, o.rounds);
    if (n == 0) skipped.emplace_back(device_call::mem_create, b);
    else handle_round(dev, s, b, n);
  }
  for (std::size_t b : o.legacy_sizes) {
    tell("cudaMalloc of", b);
    const unsigned n = fitting(dev, b, o.rounds);
    if (n == 0) skipped.emplace_back(device_call::legacy_malloc, b);
    else legacy_round(dev, s, b, n);
  }
  tell("events, streams and the device", 0);
  const event_id e = dev.event_create();
  for (unsigned i = 0; i < o.rounds; ++i) {
    s.time(device_call::event_record, 0, [&] { dev.event_record(e, 0); });
    s.time(device_call::event_query, 0, [&] { return dev.event_query(e); });
    s.time(device_call::event_synchronize, 0, [&] { dev.event_synchronize(e); });
    s.time(device_call::stream_wait_event, 0, [&] { dev.stream_wait_event(0, e); });
    s.time(device_call::stream_synchronize, 0, [&] { dev.stream_synchronize(0); });
    s.time(device_call::device_synchronize, 0, [&] { dev.device_synchronize(); });
    s.time(device_call::mem_get_info, 0, [&] { return dev.mem_info(); });
  }
  dev.event_destroy(e);
  cost_probe_result r = s.result();
  r.skipped = std::move(skipped);
  return r;
}

}  // namespace vram
