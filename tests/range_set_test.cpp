// The free lists' range_set: coalescing, best fit, and the queries the arena's placement uses, by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/core/range_set.hpp"

namespace vram::detail {
namespace {

using range = std::pair<device_ptr, std::size_t>;

TEST(RangeSet, EraseWithinCutsEveryRangeItMeets) {
  range_set r;
  r.insert(0, 100);
  r.insert(200, 100);
  r.insert(400, 100);
  EXPECT_EQ(r.erase_within(50, 350), 50u + 100u);  // [50, 100) and [200, 300); [400, 500) starts at its end
  r.validate();
  EXPECT_EQ(r.ranges(), (std::map<device_ptr, std::size_t>{{0, 50}, {400, 100}}));
  EXPECT_EQ(r.erase_within(420, 10), 10u);  // inside one range: it splits
  EXPECT_EQ(r.ranges(), (std::map<device_ptr, std::size_t>{{0, 50}, {400, 20}, {430, 70}}));
  EXPECT_EQ(r.erase_within(600, 10), 0u);
  EXPECT_EQ(r.total(), 140u);
  r.validate();
}

TEST(RangeSet, OverlapsMeansSharingAByte) {
  range_set r;
  r.insert(100, 50);
  EXPECT_FALSE(r.overlaps(50, 50));   // ends where it starts
  EXPECT_TRUE(r.overlaps(50, 51));
  EXPECT_TRUE(r.overlaps(149, 1));
  EXPECT_FALSE(r.overlaps(150, 10));  // starts where it ends
  EXPECT_TRUE(r.overlaps(0, 1000));
}

TEST(RangeSet, FindBestFitAnswersWhatTakeBestFitWouldTake) {
  range_set r;
  r.insert(1 * MiB + 512, 300 * KiB);
  r.insert(5 * MiB, 200 * KiB);
  r.insert(9 * MiB, 1000 * KiB);
  EXPECT_EQ(r.find_best_fit(150 * KiB), std::optional<device_ptr>{5 * MiB});  // the smallest that holds it
  // Aligned to 1 MiB the first range's start rounds up to 2 MiB, past its end: the next that holds it.
  EXPECT_EQ(r.find_best_fit(250 * KiB, MiB), std::optional<device_ptr>{9 * MiB});
  EXPECT_EQ(r.find_best_fit(2 * MiB), std::nullopt);
  EXPECT_EQ(r.total(), 1500 * KiB);  // nothing taken
  EXPECT_EQ(r.take_best_fit(150 * KiB), std::optional<device_ptr>{5 * MiB});
}

// Ranges of 10, 30, 20 and 20 bytes at 0, 100, 200 and 300.
range_set four_ranges() {
  range_set r;
  r.insert(0, 10);
  r.insert(100, 30);
  r.insert(200, 20);
  r.insert(300, 20);
  return r;
}

TEST(RangeSet, ForEachFitWalksFromTheSmallestThatHolds) {
  const range_set r = four_ranges();
  std::vector<range> seen;
  r.for_each_fit(20, [&](device_ptr a, std::size_t n) {
    seen.emplace_back(a, n);
    return seen.size() < 2;
  });
  EXPECT_EQ(seen, (std::vector<range>{{200, 20}, {300, 20}}));  // ties by address; stopped after two
}

TEST(RangeSet, ForEachLargestWalksFromTheLargest) {
  const range_set r = four_ranges();
  std::vector<range> seen;
  r.for_each_largest([&](device_ptr a, std::size_t n) {
    seen.emplace_back(a, n);
    return seen.size() < 3;
  });
  EXPECT_EQ(seen, (std::vector<range>{{100, 30}, {300, 20}, {200, 20}}));  // ties: higher address first
}

// A carve or a merge changes a range's key by size; where the new key keeps its place among the others the
// index changes it in place, else it moves the range. Both must leave the ranges in best-fit order.
TEST(RangeSet, ARangeThatChangesTakesItsPlaceBySizeWhetherOrNotItMoves) {
  range_set r;
  r.insert(0, 100);
  r.insert(1000, 300);
  r.insert(2000, 500);
  auto by_size = [&] {
    std::vector<range> seen;
    r.for_each_fit(1, [&](device_ptr a, std::size_t n) {
      seen.emplace_back(a, n);
      return true;
    });
    return seen;
  };
  r.erase(0, 10);  // 100 -> 90 bytes: still the smallest, so in place
  r.validate();
  EXPECT_EQ(by_size(), (std::vector<range>{{10, 90}, {1000, 300}, {2000, 500}}));
  r.erase(2000, 450);  // 500 -> 50 bytes at 2450: from the largest to the smallest
  r.validate();
  EXPECT_EQ(by_size(), (std::vector<range>{{2450, 50}, {10, 90}, {1000, 300}}));
  r.insert(2400, 50);  // joins the range after it: 100 bytes at 2400, between 90 and 300
  r.validate();
  EXPECT_EQ(by_size(), (std::vector<range>{{10, 90}, {2400, 100}, {1000, 300}}));
  r.insert(100, 900);  // joins both neighbours: [10, 1300), the largest
  r.validate();
  EXPECT_EQ(by_size(), (std::vector<range>{{2400, 100}, {10, 1290}}));
  EXPECT_EQ(r.ranges(), (std::map<device_ptr, std::size_t>{{10, 1290}, {2400, 100}}));
  EXPECT_EQ(r.largest(), 1290u);
  EXPECT_EQ(r.total(), 1390u);
  EXPECT_EQ(r.take_best_fit(60, 1), std::optional<device_ptr>{2400});  // the smallest that holds 60
  r.validate();
  EXPECT_EQ(by_size(), (std::vector<range>{{2460, 40}, {10, 1290}}));
}

}  // namespace
}  // namespace vram::detail

namespace vram::detail {
namespace {

TEST(RangeSet, AnOverlappingInsertIsCaughtInDebugBuilds) {
#if defined(VRAM_DEBUG_VALIDATE) && VRAM_DEBUG_VALIDATE
  range_set s;
  s.insert(100, 50);                                        // [100, 150)
  EXPECT_THROW(s.insert(140, 20), vram::invariant_error);   // overlaps it from the right
  EXPECT_THROW(s.insert(90, 11), vram::invariant_error);    // overlaps it from the left
  s.insert(150, 10);                                        // beside it: merges
  EXPECT_EQ(s.total(), 60u);
#else
  GTEST_SKIP() << "VRAM_ASSERT is compiled in debug builds only";
#endif
}

}  // namespace
}  // namespace vram::detail

// ---- against a reference ------------------------------------------------------------------------------------

namespace vram::detail {
namespace {

/// The simplest model of a set of free ranges: one flag per 512-byte unit of a small address space. Best fit
/// scans the maximal free runs for the smallest one that holds the block aligned (lowest address on ties).
class reference_ranges {
 public:
  static constexpr std::size_t unit = 512;
  explicit reference_ranges(std::size_t units) : free_(units, false) {}

  void insert(device_ptr a, std::size_t n) { set(a, n, true); }
  void erase(device_ptr a, std::size_t n) { set(a, n, false); }
  std::size_t erase_within(device_ptr a, std::size_t n) {
    std::size_t removed = 0;
    for (std::size_t u = a / unit; u < (a + n) / unit && u < free_.size(); ++u) removed += free_[u] ? unit : 0;
    set(a, n, false);
    return removed;
  }
  /// The maximal free runs, by address: (start, bytes).
  std::vector<std::pair<device_ptr, std::size_t>> runs() const {
    std::vector<std::pair<device_ptr, std::size_t>> out;
    for (std::size_t u = 0; u < free_.size();) {
      if (!free_[u]) {
        ++u;
        continue;
      }
      std::size_t v = u;
      while (v < free_.size() && free_[v]) ++v;
      out.emplace_back(u * unit, (v - u) * unit);
      u = v;
    }
    return out;
  }
  std::optional<device_ptr> best_fit(std::size_t n, std::size_t align) const {
    std::optional<std::pair<std::size_t, device_ptr>> best;  // (run length, run start)
    std::optional<device_ptr> at;
    for (const auto& [start, len] : runs()) {
      const device_ptr a = round_up(start, align);
      if (a + n > start + len) continue;
      if (!best || std::pair{len, start} < *best) best = std::pair{len, start}, at = a;
    }
    return at;
  }
  bool is_free(std::size_t u) const { return free_[u]; }
  std::size_t units() const { return free_.size(); }

 private:
  void set(device_ptr a, std::size_t n, bool v) {
    for (std::size_t u = a / unit; u < (a + n) / unit && u < free_.size(); ++u) free_[u] = v;
  }
  std::vector<bool> free_;
};

TEST(RangeSet, AgreesWithAReferenceOverARandomRun) {
  constexpr std::size_t units = 256, unit = reference_ranges::unit;
  for (const std::uint32_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto pick = [&rng](std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(rng); };
    range_set set;
    reference_ranges ref(units);
    for (int step = 0; step < 4000; ++step) {
      const std::size_t op = pick(0, 3);
      if (op == 0) {  // insert a run of taken units, as far as it stays taken
        const std::size_t u = pick(0, units - 1);
        if (ref.is_free(u)) continue;
        std::size_t v = u;
        const std::size_t most = pick(1, 16);
        while (v < units && v - u < most && !ref.is_free(v)) ++v;
        set.insert(u * unit, (v - u) * unit);
        ref.insert(u * unit, (v - u) * unit);
      } else if (op == 1) {  // take a best fit
        const std::size_t n = pick(1, 12) * unit;
        const std::size_t align = std::size_t{512} << pick(0, 3);
        const auto want = ref.best_fit(n, align);
        ASSERT_EQ(set.find_best_fit(n, align), want) << "find_best_fit(" << n << ", " << align << ")";
        const auto got = set.take_best_fit(n, align);
        ASSERT_EQ(got, want) << "take_best_fit(" << n << ", " << align << ")";
        if (got) ref.erase(*got, n);
      } else if (op == 2) {  // erase part of one free run
        const auto runs = ref.runs();
        if (runs.empty()) continue;
        const auto [start, len] = runs[pick(0, runs.size() - 1)];
        const std::size_t off = pick(0, len / unit - 1) * unit, n = pick(1, (len - off) / unit) * unit;
        set.erase(start + off, n);
        ref.erase(start + off, n);
      } else {  // erase whatever lies in a window
        const std::size_t u = pick(0, units - 1), n = pick(1, 24);
        ASSERT_EQ(set.erase_within(u * unit, n * unit), ref.erase_within(u * unit, n * unit));
      }
      const auto runs = ref.runs();
      using run_list = std::vector<std::pair<device_ptr, std::size_t>>;
      ASSERT_EQ(run_list(set.ranges().begin(), set.ranges().end()), runs);
      std::size_t total = 0, largest = 0;
      for (const auto& [s, n] : runs) total += n, largest = std::max(largest, n);
      ASSERT_EQ(set.total(), total);
      ASSERT_EQ(set.largest(), largest);
      ASSERT_EQ(set.count(), runs.size());
      const std::size_t probe = pick(0, units - 1);
      ASSERT_EQ(set.overlaps(probe * unit, unit), ref.is_free(probe));
      ASSERT_EQ(set.containing(probe * unit).has_value(), ref.is_free(probe));
      set.validate();
    }
  }
}

}  // namespace
}  // namespace vram::detail
