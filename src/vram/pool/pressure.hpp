#pragma once
// How near the arena is to its bounds, judged afresh at every request (arena.hpp says what each stage turns
// on). A pure function of the arena's figures, so it is tested without a device.
//  - roomy: none of the below;
//  - lean: the cache budget beside the request no longer fits under the reserve bound (reserve_ratio x the
//    peak in use);
//  - tight: the device (or the limit) has no room left for tight_budgets cache budgets beside the request;
//  - full: it has no room left for one.
// The cache budget is max_cached_ratio x (the bytes in use + the request). Each stage includes the ones
// before it: a tight arena is lean too.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vram::detail {

enum class pressure : std::uint8_t { roomy, lean, tight, full };

std::string_view to_string(pressure p) noexcept;

/// @brief What the judgement reads, all in bytes but the two ratios.
struct pressure_inputs {
  std::size_t request = 0;    // the bytes asked for now
  std::size_t reserved = 0;   // held from the device
  std::size_t in_use = 0;     // in live blocks
  std::size_t capacity = 0;   // the device's memory, or the limit when lower
  std::size_t lean_bound = 0; // reserve_bound() for this request
  double max_cached_ratio = 0;
  double tight_budgets = 1;   // taken as at least 1
};

pressure judge_pressure(const pressure_inputs& in) noexcept;

/// @brief The reserve bound the arena keeps under: reserve_ratio x the larger of the peak in use and what is
/// in use with the request, no more than @p capacity; @p capacity when @p reserve_ratio is 0 (never lean).
std::size_t reserve_bound(double reserve_ratio, std::size_t peak_in_use, std::size_t in_use, std::size_t request,
                          std::size_t capacity) noexcept;

}  // namespace vram::detail
