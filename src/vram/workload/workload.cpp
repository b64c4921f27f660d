// The table of synthetic workloads and lookup by name.
#include "vram/workload/workload.hpp"

#include <array>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "vram/core/error.hpp"

namespace vram {

std::span<const workload_info> workloads() {
  static const std::array<workload_info, 3> table{{
      {"alternating", "1000 x 1 KiB, every other freed, then 500 x 2 KiB that fit no hole", &make_alternating_workload},
      {"mixed", "512 B to 64 MiB, random lifetimes, freed out of order", &make_mixed_workload},
      {"inference", "a serving process: batch x sequence length varies request by request, for hours",
       &make_inference_workload},
  }};
  return table;
}

void check_workload_options(const workload_options& options) {
  if (!std::isfinite(options.hours) || options.hours <= 0 || options.hours > max_workload_hours) {
    throw usage_error(fmt::format("--hours {}: want a number of simulated hours above 0 and at most {}",
                                  options.hours, max_workload_hours));
  }
  if (options.scale < 1 || options.scale > max_workload_scale) {
    throw usage_error(fmt::format("--scale {}: want a whole number from 1 to {}", options.scale, max_workload_scale));
  }
}

trace make_workload(std::string_view name, const workload_options& options) {
  check_workload_options(options);
  std::string known;
  for (const auto& w : workloads()) {
    if (w.name == name) return w.make(options);
    known += known.empty() ? "" : ", ";
    known += w.name;
  }
  throw usage_error("unknown workload '" + std::string(name) + "'; known workloads: " + known);
}

}  // namespace vram
