// Binary search of the smallest device a trace fits on; see fit.hpp for the argument.
#include "vram/replay/fit.hpp"

#include "vram/resource/registry.hpp"

namespace vram {

namespace detail {

struct probe_outcome {
  replay_result result;
  std::size_t device_peak_used = 0;
};

probe_outcome probe(const trace& t, std::string_view policy, const sim_device_options& base, std::size_t capacity) {
  sim_device_options o = base;
  o.capacity = capacity;
  sim_device dev(o);
  auto resource = make_resource(policy, dev);
  replay_options ro;
  ro.stop_at_first_failure = true;
  probe_outcome out{replay(t, *resource, ro), 0};
  out.device_peak_used = dev.peak_used_bytes();
  return out;
}

}  // namespace detail

fit_result fit(const trace& t, std::string_view policy, const fit_options& options) {
  const std::size_t g = options.device.granularity;
  fit_result out;
  auto top = detail::probe(t, policy, options.device, options.device.capacity);
  out.probes = 1;
  const bool top_fits = top.result.failed_allocations == 0;
  if (options.progress) options.progress(out.probes, options.device.capacity, top_fits);
  if (!top_fits) {
    out.replay = std::move(top.result);
    return out;
  }
  // hi fits; lo does not (or is 0, a device of no memory).
  std::size_t hi = round_up(top.device_peak_used, g);
  if (hi == 0) hi = g;
  std::size_t lo = top.result.peak_live_bytes == 0 ? 0 : (top.result.peak_live_bytes - 1) / g * g;
  replay_result best = std::move(top.result);
  if (hi != options.device.capacity) {
    // Confirm the upper end: on a device this size the replay is the one just run, but check it.
    auto at_hi = detail::probe(t, policy, options.device, hi);
    ++out.probes;
    if (options.progress) options.progress(out.probes, hi, at_hi.result.failed_allocations == 0);
    if (at_hi.result.failed_allocations != 0) hi = options.device.capacity;  // not monotone: keep the big device
    else best = std::move(at_hi.result);
  }
  while (hi - lo > g) {
    const std::size_t mid = lo + (hi - lo) / g / 2 * g;
    auto p = detail::probe(t, policy, options.device, mid);
    ++out.probes;
    const bool fits = p.result.failed_allocations == 0;
    if (options.progress) options.progress(out.probes, mid, fits);
    if (fits) {
      hi = mid;
      best = std::move(p.result);
    } else {
      lo = mid;
    }
  }
  out.fit_bytes = hi;
  out.replay = std::move(best);
  return out;
}

}  // namespace vram
