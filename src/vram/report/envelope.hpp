#pragma once
// A step series (a value that holds from each time on, as live or reserved bytes do between a trace's rows)
// reduced to a fixed number of equal time buckets, each keeping the lowest and the highest value held in
// it. However short a peak, it lands in some bucket's highest value, so the highest over the buckets is the
// series' peak exactly; a page drawn from the buckets shows every peak at its height.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vram {

class envelope {
 public:
  /// @brief Buckets of equal width over [t0, t1]. pre: t0 <= t1, buckets >= 1. The value is 0 until added.
  envelope(std::int64_t t0, std::int64_t t1, std::size_t buckets);

  /// @brief The series takes @p value at @p t and holds it. pre: t0 <= t <= t1, t not below the last t.
  void add(std::int64_t t, std::size_t value);
  /// @brief The bucket that holds time @p t (t1 falls in the last bucket).
  std::size_t bucket_of(std::int64_t t) const noexcept;
  /// @brief The start of bucket @p b, in the units of t.
  double bucket_start(std::size_t b) const noexcept;

  /// @brief Lowest and highest value held in each bucket; buckets after the last add hold its value.
  std::vector<std::size_t> lows() const;
  std::vector<std::size_t> highs() const;
  std::size_t buckets() const noexcept { return low_.size(); }

 private:
  void fill_to(std::size_t b);  // buckets (filled_, b] take the value held entering them

  std::int64_t t0_, t1_;
  std::vector<std::size_t> low_, high_;
  std::size_t filled_ = 0;  // buckets [0, filled_) have been entered
  std::size_t value_ = 0;
};

}  // namespace vram
