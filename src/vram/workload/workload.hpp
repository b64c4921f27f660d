#pragma once
// Synthetic workloads, one for each cause of fragmentation, so vram runs and demonstrates itself without
// recorded traces. Each is deterministic for a given seed.
//  - alternating: 1000 x 1 KiB, every other one freed, then 500 x 2 KiB that fit none of the holes;
//  - mixed:       sizes from 512 B to 64 MiB (log-uniform) with random lifetimes, freed out of order;
//  - inference:   a long-running serving process: weights once, then requests of varying batch x sequence
//                 length, several in flight, each with a KV cache per layer, prefill temporaries and decode
//                 steps, for `hours` of simulated traffic.

#include <cstdint>
#include <span>
#include <string_view>

#include "vram/trace/trace.hpp"

namespace vram {

struct workload_options {
  std::uint64_t seed = 1;
  double hours = 6.0;  // inference: hours of simulated traffic
  std::uint64_t scale = 1;  // mixed: multiplies the number of operations
};

/// @brief The most hours of `inference` one run makes: ten days, about 2.5 GB of events in memory.
inline constexpr double max_workload_hours = 240.0;
/// @brief The largest `mixed` scale: 20 million operations, about 1.3 GB of events.
inline constexpr std::uint64_t max_workload_scale = 1000;

/// @brief @throws usage_error unless hours is a number above 0 and at most max_workload_hours, and scale is
/// from 1 to max_workload_scale.
void check_workload_options(const workload_options& options);

struct workload_info {
  std::string_view name;
  std::string_view summary;
  trace (*make)(const workload_options&);
};

/// @brief The synthetic workloads, in the order the demo shows them.
std::span<const workload_info> workloads();

/// @brief Makes the named workload. @throws usage_error for an unknown name (the message lists the known
/// ones) or options out of range (check_workload_options).
trace make_workload(std::string_view name, const workload_options& options = {});

trace make_alternating_workload(const workload_options& options);
trace make_mixed_workload(const workload_options& options);
trace make_inference_workload(const workload_options& options);

}  // namespace vram
