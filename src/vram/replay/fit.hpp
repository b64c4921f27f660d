#pragma once
// `vram fit`: the smallest simulated device, to the granule, on which a trace replays with no failed
// allocation under a given policy. Binary search over capacity: the upper end is the device memory the
// replay used on a device large enough never to fail (checked by a replay on a device that size), the lower
// end the largest granule multiple below peak live bytes (which cannot fit). Success need not be monotone in
// capacity: a policy whose choices depend on the memory left (vram's pool turns generous when the device is
// nearly full) can fit on N bytes and fail on N + 2 MiB. So the answer is checked: the next verify_granules
// capacities above it are replayed too, and a failure there moves the search above the failure. The answer
// is then a capacity that fits, as do the verify_granules capacities above it; the smallest capacity seen to
// fit is reported beside it.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "vram/device/sim_device.hpp"
#include "vram/replay/replay.hpp"

namespace vram {

struct fit_options {
  sim_device_options device;  // capacity is the largest device tried
  /// @brief Called after each probe: its number, the capacity tried, whether it fit.
  std::function<void(int probe, std::size_t capacity, bool fits)> progress;
  /// @brief Capacities above the answer (in granules) that must fit too; 0 trusts the binary search.
  std::size_t verify_granules = 8;
};

struct fit_result {
  std::optional<std::size_t> fit_bytes;  // none when the trace fails even on the largest device
  int probes = 0;
  /// @brief False when some capacity failed above one that fitted (the answer is above every such failure
  /// that the probes met).
  bool monotone = true;
  std::optional<std::size_t> lowest_fit_bytes;  // the smallest capacity any probe fitted on
  replay_result replay;  // the replay on a device of fit_bytes (or on the largest device when none fits)
};

/// @brief Makes the allocator under test over each probe's device.
using resource_factory = std::function<std::unique_ptr<memory_resource>(device&)>;

/// @brief Finds the smallest capacity for @p t under @p policy. @throws usage_error for an unknown policy.
fit_result fit(const trace& t, std::string_view policy, const fit_options& options = {});
/// @brief As above, for any allocator.
fit_result fit(const trace& t, const resource_factory& make, const fit_options& options = {});

}  // namespace vram
