// The pace of growth: a burst is growth summing to burst_bytes within the window, worked out by hand.
#include <gtest/gtest.h>

#include "vram/pool/growth_pace.hpp"

namespace vram::detail {
namespace {

TEST(GrowthPace, ABurstIsTheWindowsGrowthReachingTheBytes) {
  growth_pace pace(100, 10);  // 100 bytes within 10 ns
  EXPECT_FALSE(pace.bursting());
  EXPECT_FALSE(pace.note(0, 40));
  EXPECT_FALSE(pace.note(5, 50));  // 90
  EXPECT_TRUE(pace.note(9, 10));   // 100: exactly the burst
  EXPECT_TRUE(pace.bursting());
  EXPECT_EQ(pace.recent_bytes(), 100u);
  // At 10 the growth at 0 has left the window (it counts for [0, 10)): 60.
  EXPECT_FALSE(pace.note(10, 0));
  EXPECT_EQ(pace.recent_bytes(), 60u);
  EXPECT_EQ(pace.entries(), 3u);  // 5, 9 and 10
  EXPECT_TRUE(pace.note(10, 40));  // the same instant shares the entry: 100
  EXPECT_EQ(pace.entries(), 3u);
  // At 19 the growths at 5 and 9 are gone; the 40 bytes at 10 stay.
  EXPECT_FALSE(pace.note(19, 0));
  EXPECT_EQ(pace.recent_bytes(), 40u);
  EXPECT_EQ(pace.entries(), 2u);
}

TEST(GrowthPace, AClockThatStandsStillKeepsOneEntry) {
  growth_pace pace(1000, 10);
  for (int i = 0; i < 999; ++i) EXPECT_FALSE(pace.note(7, 1));
  EXPECT_EQ(pace.entries(), 1u);
  EXPECT_TRUE(pace.note(7, 1));
  EXPECT_EQ(pace.recent_bytes(), 1000u);
}

TEST(GrowthPace, OneLargeGrowthIsABurstByItself) {
  growth_pace pace(256, 10'000'000);
  EXPECT_TRUE(pace.note(0, 256));
  EXPECT_FALSE(pace.note(10'000'000, 255));  // the first has left the window
}

}  // namespace
}  // namespace vram::detail
