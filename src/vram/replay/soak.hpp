#pragma once
// The soak: does an allocator keep a long-running service alive on a device with little room to spare?
// It makes the `inference` workload (a serving process; workload.hpp) for a number of simulated hours,
// replays it once on a large device to learn its peak live bytes, then replays it for each policy on a
// simulated device of headroom x peak live (rounded up to 2 MiB), and reports per policy whether and when
// an allocation first failed, the device's free share at that moment, the peak reserved bytes, and the
// creep: peak reserved over the last sixth of the run divided by that over the first sixth (above 1 when the
// allocator holds more and more memory for the same traffic).
//
// The per-policy run drives the allocator itself, by the same rules as replay() (program rows only; a free
// that matches no live block is skipped, as is the free of an allocation that failed), because it needs the
// peak reserved bytes of each sixth of the run, which replay() does not keep. A window's peak includes the
// reserved bytes carried into it, so it is the exact maximum over the window's time. tests/soak_test.cpp
// checks that the two loops agree on the whole-run figures.

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "vram/device/sim_device.hpp"
#include "vram/trace/trace.hpp"

namespace vram {

/// The run is cut into this many windows of equal simulated time; creep compares the last with the first.
inline constexpr std::size_t soak_windows = 6;

struct soak_options {
  double hours = 72.0;      // simulated hours of traffic (> 0)
  double headroom = 1.05;   // device = headroom x peak live bytes, rounded up to 2 MiB (>= 1)
  std::uint64_t seed = 1;   // the workload's seed
  std::vector<std::string> policies;  // policy specs; empty: every policy of the registry
  /// @brief Called now and then during each policy's run with the simulated hours replayed so far.
  std::function<void(std::string_view policy, double hours_done, double hours_total)> progress;
};

/// @brief One policy's soak.
struct soak_policy_result {
  std::string policy;
  std::uint64_t allocations = 0;
  std::uint64_t failed_allocations = 0;
  std::optional<double> first_failure_hours;          // simulated time of the first failed allocation
  std::optional<double> free_share_at_first_failure;  // device free / total at that moment
  std::size_t peak_reserved_bytes = 0;
  std::size_t peak_live_bytes = 0;  // live bytes this run reached (lower than the trace's once allocations fail)
  std::array<std::size_t, soak_windows> window_peak_reserved_bytes{};
  std::array<std::size_t, soak_windows> window_peak_live_bytes{};  // the traffic's share of any creep
  double creep = 0;       // window_peak_reserved_bytes.back() / .front()
  double live_creep = 0;  // window_peak_live_bytes.back() / .front(): what the traffic alone would give
  std::size_t final_reserved_bytes = 0;

  bool failed() const noexcept { return failed_allocations > 0; }
};

/// @brief The whole soak: the workload, the device it ran on, and one result per policy.
struct soak_report {
  std::string workload = "inference";
  double hours = 0;
  std::uint64_t seed = 0;
  double headroom = 0;
  std::uint64_t events = 0;
  std::size_t peak_live_bytes = 0;  // from the replay on the large device
  std::size_t device_bytes = 0;     // capacity of each policy's device
  std::vector<soak_policy_result> results;
};

/// The largest --headroom: the device is at most this many times the workload's peak live bytes (a device far
/// larger only tells that every allocator fits, and past simulated devices' largest size none can be made).
inline constexpr double max_soak_headroom = 100.0;

/// @brief Checks the options: hours above 0 and at most max_workload_hours, headroom from 1 to
/// max_soak_headroom, known policies.
/// @throws usage_error naming the bad value.
void check_soak_options(const soak_options& options);

/// @brief Runs the soak (see the top of this file). @throws usage_error for bad options (check_soak_options).
soak_report run_soak(const soak_options& options);

/// @brief One policy's run of @p t on a fresh simulated device made from @p device.
/// @p progress, when set, gets the simulated hours done now and then. @throws usage_error for an unknown policy.
soak_policy_result soak_policy(const trace& t, std::string_view policy, const sim_device_options& device,
                               const std::function<void(double hours_done)>& progress = {});

/// @brief The report as JSON (keys in docs/soak.md).
nlohmann::json to_json(const soak_report& report);

}  // namespace vram
