#include "vram/report/envelope.hpp"
#include "vram/core/assert.hpp"

#include <algorithm>

#include "vram/core/error.hpp"

namespace vram {

envelope::envelope(std::int64_t t0, std::int64_t t1, std::size_t buckets)
    : t0_(t0), t1_(t1), low_(buckets, 0), high_(buckets, 0) {
  if (buckets == 0 || t1 < t0) throw usage_error("envelope: needs at least one bucket and t0 <= t1");
}

std::size_t envelope::bucket_of(std::int64_t t) const noexcept {
  if (t <= t0_ || t1_ == t0_) return 0;
  if (t >= t1_) return low_.size() - 1;
  // (t - t0) * buckets / span in 128 bits: a span of years in nanoseconds times 10^4 buckets overflows 64.
  __extension__ using u128 = unsigned __int128;
  const u128 at = static_cast<u128>(static_cast<std::uint64_t>(t - t0_)) * low_.size();
  return static_cast<std::size_t>(at / static_cast<std::uint64_t>(t1_ - t0_));
}

double envelope::bucket_start(std::size_t b) const noexcept {
  return static_cast<double>(t0_) +
         static_cast<double>(t1_ - t0_) * static_cast<double>(b) / static_cast<double>(low_.size());
}

void envelope::fill_to(std::size_t b) {
  for (; filled_ <= b; ++filled_) low_[filled_] = high_[filled_] = value_;
}

void envelope::add(std::int64_t t, std::size_t value) {
  VRAM_ASSERT(t >= t0_ && t <= t1_, "envelope::add: a time outside [t0, t1]");
  const std::size_t b = bucket_of(t);
  VRAM_ASSERT(b + 1 >= filled_, "envelope::add: a time before the last one added");
  fill_to(b);
  low_[b] = std::min(low_[b], value);
  high_[b] = std::max(high_[b], value);
  value_ = value;
}

std::vector<std::size_t> envelope::lows() const {
  std::vector<std::size_t> out = low_;
  std::fill(out.begin() + static_cast<std::ptrdiff_t>(filled_), out.end(), value_);
  return out;
}

std::vector<std::size_t> envelope::highs() const {
  std::vector<std::size_t> out = high_;
  std::fill(out.begin() + static_cast<std::ptrdiff_t>(filled_), out.end(), value_);
  return out;
}

}  // namespace vram
