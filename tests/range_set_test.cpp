// The free lists' range_set: coalescing, best fit, and the queries the arena's placement uses, by hand.
#include <gtest/gtest.h>

#include "vram/core/error.hpp"
#include "vram/pool/range_set.hpp"

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

TEST(RangeSet, ForEachFitWalksFromTheSmallestThatHolds) {
  range_set r;
  r.insert(0, 10);
  r.insert(100, 30);
  r.insert(200, 20);
  r.insert(300, 20);
  std::vector<range> seen;
  r.for_each_fit(20, [&](device_ptr a, std::size_t n) {
    seen.emplace_back(a, n);
    return seen.size() < 2;
  });
  EXPECT_EQ(seen, (std::vector<range>{{200, 20}, {300, 20}}));  // ties by address; stopped after two
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
