// The arena's pressure (pressure.hpp).
#include "vram/pool/pressure.hpp"

#include <algorithm>

namespace vram::detail {

std::string_view to_string(pressure p) noexcept {
  switch (p) {
    case pressure::roomy: return "roomy";
    case pressure::lean: return "lean";
    case pressure::tight: return "tight";
    case pressure::full: return "full";
  }
  return "?";
}

pressure judge_pressure(const pressure_inputs& in) noexcept {
  // Whether the memory left under the bound is less than the request and `budgets` cache budgets beside it.
  const auto no_room_under = [&](std::size_t bound, double budgets) {
    const std::size_t left = bound > in.reserved ? bound - in.reserved : 0;
    return static_cast<double>(left) <
           budgets * in.max_cached_ratio * static_cast<double>(in.in_use + in.request) + static_cast<double>(in.request);
  };
  if (no_room_under(in.capacity, std::max(in.tight_budgets, 1.0)))
    return no_room_under(in.capacity, 1.0) ? pressure::full : pressure::tight;
  return no_room_under(in.lean_bound, 1.0) ? pressure::lean : pressure::roomy;
}

std::size_t reserve_bound(double reserve_ratio, std::size_t peak_in_use, std::size_t in_use, std::size_t request,
                          std::size_t capacity) noexcept {
  if (reserve_ratio <= 0) return capacity;
  const double bound = reserve_ratio * static_cast<double>(std::max(peak_in_use, in_use + request));
  return bound < static_cast<double>(capacity) ? static_cast<std::size_t>(bound) : capacity;
}

}  // namespace vram::detail
