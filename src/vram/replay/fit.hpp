#pragma once
// `vram fit`: the smallest simulated device, to the granule, on which a trace replays with no failed
// allocation under a given policy. Binary search over capacity: the upper end is the device memory the
// replay used on a device large enough never to fail (the same replay runs identically on any device at
// least that large), the lower end the largest granule multiple below peak live bytes (which cannot fit).
// It assumes that success is monotone in capacity, true of every policy here but not a law: a policy
// whose behaviour changes with free memory could fit on N bytes and fail on N + 2 MiB.

#include <cstddef>
#include <functional>
#include <optional>
#include <string_view>

#include "vram/device/sim_device.hpp"
#include "vram/replay/replay.hpp"

namespace vram {

struct fit_options {
  sim_device_options device;  // capacity is the largest device tried
  /// @brief Called after each probe: its number, the capacity tried, whether it fit.
  std::function<void(int probe, std::size_t capacity, bool fits)> progress;
};

struct fit_result {
  std::optional<std::size_t> fit_bytes;  // none when the trace fails even on the largest device
  int probes = 0;
  replay_result replay;  // the replay on a device of fit_bytes (or on the largest device when none fits)
};

/// @brief Finds the smallest capacity for @p t under @p policy. @throws usage_error for an unknown policy.
fit_result fit(const trace& t, std::string_view policy, const fit_options& options = {});

}  // namespace vram
