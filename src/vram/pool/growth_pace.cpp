// The pace of growth (growth_pace.hpp).
#include "vram/pool/growth_pace.hpp"

namespace vram::detail {

bool growth_pace::note(std::int64_t now, std::size_t bytes) {
  while (!recent_.empty() && recent_.front().first <= now - window_ns_) {
    recent_bytes_ -= recent_.front().second;
    recent_.pop_front();
  }
  // Growths at one instant share an entry, so a clock that stands still (the simulated device outside a
  // replay) keeps one entry, not one per growth.
  if (!recent_.empty() && recent_.back().first == now) recent_.back().second += bytes;
  else recent_.emplace_back(now, bytes);
  recent_bytes_ += bytes;
  bursting_ = recent_bytes_ >= burst_bytes_;
  return bursting_;
}

}  // namespace vram::detail
