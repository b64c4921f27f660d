#pragma once
// Measuring a device's own call costs, for a cost model of that device (`vram probe --costs FILE`, then
// `--device sim:costs=FILE`): every call kind of the seam, made a number of times at each of a few sizes, its
// time read from the device's own accounting (device::calls()). On a GPU that is the time each driver call
// took; on the simulated device it is the model's, so a probe there gives back the model it runs under, at
// the sizes probed.
//
// The calls come in the order a pool makes them: a round of handles is created, mapped side by side in one
// reservation, given access, then unmapped and released (no create follows a release of its own size); a
// round of legacy blocks is allocated, then freed. Each size takes at most half the free memory: fewer calls
// there, none where not one fits. pre: nothing else uses the device while the probe runs.

#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include "vram/core/size.hpp"
#include "vram/device/cost_model.hpp"
#include "vram/device/device.hpp"

namespace vram {

struct cost_probe_options {
  /// Sizes of the virtual memory calls (a handle, a reservation): multiples of the granularity.
  std::vector<std::size_t> handle_sizes = {2 * MiB, 8 * MiB, 32 * MiB, 64 * MiB, 128 * MiB, 512 * MiB};
  /// Sizes of the legacy calls (cudaMalloc / cudaFree).
  std::vector<std::size_t> legacy_sizes = {2 * MiB, 8 * MiB, 64 * MiB, 256 * MiB, 1 * GiB};
  /// Calls of each kind at each size; the median is kept. > 0.
  unsigned rounds = 16;
  /// Told each size as it starts ("mem_create 64 MiB"), for a progress line.
  std::function<void(std::string_view)> progress;
};

/// @brief One kind at one size: how many calls, and their time.
struct cost_sample {
  device_call kind{};
  std::size_t bytes = 0;  // 0 for the calls without a size (events, streams, mem_get_info)
  unsigned calls = 0;
  double median_ns = 0, min_ns = 0, max_ns = 0;
};

struct cost_probe_result {
  /// A curve for every kind measured: its medians by size (a flat curve for the calls without a size).
  cost_model model;
  std::vector<cost_sample> samples;  // by kind, then size
  /// Sizes skipped for want of free memory: (kind, bytes).
  std::vector<std::pair<device_call, std::size_t>> skipped;
};

/// @brief Measures every call kind on @p dev and leaves it as it found it. @throws usage_error for no sizes,
/// 0 rounds or a handle size that is not a multiple of the granularity.
cost_probe_result measure_costs(device& dev, const cost_probe_options& options = {});

}  // namespace vram
