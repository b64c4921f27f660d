// The table of synthetic workloads and lookup by name.
#include "vram/workload/workload.hpp"

#include <array>
#include <string>

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

trace make_workload(std::string_view name, const workload_options& options) {
  std::string known;
  for (const auto& w : workloads()) {
    if (w.name == name) return w.make(options);
    known += known.empty() ? "" : ", ";
    known += w.name;
  }
  throw usage_error("unknown workload '" + std::string(name) + "'; known workloads: " + known);
}

}  // namespace vram
