// Binary search of the smallest device a trace fits on, with the capacities above the answer checked; see
// fit.hpp for the argument.
#include "vram/replay/fit.hpp"

#include <map>

#include "vram/policies/registry.hpp"

namespace vram {

namespace {

struct probe_outcome {
  replay_result result;
  std::size_t device_peak_used = 0;
};

probe_outcome probe(const trace& t, const resource_factory& make, const sim_device_options& base,
                    std::size_t capacity) {
  sim_device_options o = base;
  o.capacity = capacity;
  sim_device dev(o);
  auto resource = make(dev);
  replay_options ro;
  ro.stop_at_first_failure = true;
  probe_outcome out{replay(t, *resource, ro), 0};
  out.device_peak_used = dev.peak_used_bytes();
  return out;
}

}  // namespace

fit_result fit(const trace& t, std::string_view policy, const fit_options& options) {
  fit_result f = fit(t, [&](device& dev) { return make_resource(policy, dev); }, options);
  f.replay.policy = std::string(policy);  // with its settings, as given
  return f;
}

fit_result fit(const trace& t, const resource_factory& make, const fit_options& options) {
  const std::size_t g = options.device.granularity;
  const std::size_t most = options.device.capacity;
  fit_result out;
  std::map<std::size_t, bool> fits;         // every capacity probed: whether the trace fitted
  std::map<std::size_t, replay_result> ok;  // the replays that fitted, by capacity
  auto fits_at = [&](std::size_t capacity) -> std::pair<bool, std::size_t> {
    if (const auto it = fits.find(capacity); it != fits.end()) return {it->second, 0};
    auto p = probe(t, make, options.device, capacity);
    ++out.probes;
    const bool f = p.result.failed_allocations == 0;
    fits[capacity] = f;
    if (options.progress) options.progress(out.probes, capacity, f);
    if (f) ok.emplace(capacity, std::move(p.result));
    else if (capacity == most) out.replay = std::move(p.result);
    return {f, p.device_peak_used};
  };
  const auto [top_fits, top_used] = fits_at(most);
  if (!top_fits) return out;
  // hi fits; lo does not (or is 0, a device of no memory).
  std::size_t hi = std::max(round_up(top_used, g), g);
  const std::size_t live = ok.at(most).peak_live_bytes;
  std::size_t lo = live == 0 ? 0 : (live - 1) / g * g;
  // On a device the size the replay used it should run as on the largest, but a policy that reads the memory
  // left may not: then the search starts from the largest device.
  if (hi < most && !fits_at(hi).first) hi = most;
  for (;;) {
    while (hi - lo > g) {
      const std::size_t mid = lo + (hi - lo) / g / 2 * g;
      (fits_at(mid).first ? hi : lo) = mid;
    }
    for (std::size_t k = 1; k <= options.verify_granules && hi + k * g < most; ++k) fits_at(hi + k * g);
    // The answer must lie above every capacity that failed: if one above it did, search again above that.
    std::size_t failed = 0;
    for (const auto& [c, f] : fits)
      if (!f) failed = c;
    if (failed < hi) break;
    lo = failed;
    auto above = fits.upper_bound(failed);  // the largest device fitted, so a capacity above fits
    while (!above->second) ++above;
    hi = above->first;
  }
  out.lowest_fit_bytes = ok.begin()->first;
  out.monotone = out.lowest_fit_bytes == hi;
  out.fit_bytes = hi;
  out.replay = std::move(ok.at(hi));
  return out;
}

}  // namespace vram
