// The arena's pressure and its reserve bound, at the boundaries, worked out by hand. A quarter is the cache
// ratio throughout so that every threshold is an exact number of bytes.
#include <gtest/gtest.h>

#include "vram/core/types.hpp"
#include "vram/pool/pressure.hpp"

namespace vram::detail {
namespace {

// 100 MiB of device, 30 MiB in use, a 10 MiB request: the cache budget is 0.25 x 40 = 10 MiB, so tight
// below 3 x 10 + 10 = 40 MiB left and full below 10 + 10 = 20 MiB left.
pressure_inputs hundred_mib(std::size_t reserved) {
  pressure_inputs in;
  in.request = 10 * MiB;
  in.reserved = reserved;
  in.in_use = 30 * MiB;
  in.capacity = 100 * MiB;
  in.lean_bound = 100 * MiB;
  in.max_cached_ratio = 0.25;
  in.tight_budgets = 3;
  return in;
}

TEST(Pressure, TightBelowThreeBudgetsBesideTheRequestAndFullBelowOne) {
  EXPECT_EQ(judge_pressure(hundred_mib(0)), pressure::roomy);
  EXPECT_EQ(judge_pressure(hundred_mib(60 * MiB)), pressure::roomy);  // 40 MiB left: exactly enough
  EXPECT_EQ(judge_pressure(hundred_mib(60 * MiB + 1)), pressure::tight);
  EXPECT_EQ(judge_pressure(hundred_mib(80 * MiB)), pressure::tight);  // 20 MiB left: one budget exactly
  EXPECT_EQ(judge_pressure(hundred_mib(80 * MiB + 1)), pressure::full);
  EXPECT_EQ(judge_pressure(hundred_mib(120 * MiB)), pressure::full);  // above the capacity: none left
}

TEST(Pressure, LeanWhenOneBudgetNoLongerFitsUnderTheReserveBound) {
  auto in = hundred_mib(50 * MiB);
  in.lean_bound = 70 * MiB;  // 20 MiB left under it: one budget and the request, exactly
  EXPECT_EQ(judge_pressure(in), pressure::roomy);
  in.lean_bound = 70 * MiB - 1;
  EXPECT_EQ(judge_pressure(in), pressure::lean);
  in.lean_bound = 0;
  EXPECT_EQ(judge_pressure(in), pressure::lean);
  in.reserved = 61 * MiB;  // tight outranks lean
  EXPECT_EQ(judge_pressure(in), pressure::tight);
}

TEST(Pressure, FewerThanOneTightBudgetCountsAsOne) {
  auto in = hundred_mib(70 * MiB);  // 30 MiB left: tight with 3 budgets (40), not with 1 (20)
  EXPECT_EQ(judge_pressure(in), pressure::tight);
  in.tight_budgets = 0.5;
  EXPECT_EQ(judge_pressure(in), pressure::roomy);
  in.tight_budgets = 2;  // 2 x 10 + 10 = 30: exactly enough
  EXPECT_EQ(judge_pressure(in), pressure::roomy);
}

TEST(Pressure, NoCacheRatioLeavesOnlyTheRequest) {
  auto in = hundred_mib(90 * MiB);
  in.max_cached_ratio = 0;
  EXPECT_EQ(judge_pressure(in), pressure::roomy);  // 10 MiB left for a 10 MiB request
  in.reserved = 90 * MiB + 1;
  EXPECT_EQ(judge_pressure(in), pressure::full);
}

TEST(Pressure, StagesAreOrderedAndNamed) {
  EXPECT_LT(pressure::roomy, pressure::lean);
  EXPECT_LT(pressure::lean, pressure::tight);
  EXPECT_LT(pressure::tight, pressure::full);
  EXPECT_EQ(to_string(pressure::roomy), "roomy");
  EXPECT_EQ(to_string(pressure::lean), "lean");
  EXPECT_EQ(to_string(pressure::tight), "tight");
  EXPECT_EQ(to_string(pressure::full), "full");
}

TEST(ReserveBound, IsTheRatioOfTheLargerPeakUnderTheCapacity) {
  EXPECT_EQ(reserve_bound(0, 40 * MiB, 30 * MiB, 20 * MiB, 100 * MiB), 100 * MiB);  // 0: never lean
  EXPECT_EQ(reserve_bound(1.5, 40 * MiB, 30 * MiB, 20 * MiB, 100 * MiB), 75 * MiB);  // 1.5 x (30 + 20)
  EXPECT_EQ(reserve_bound(1.5, 60 * MiB, 30 * MiB, 20 * MiB, 100 * MiB), 90 * MiB);  // 1.5 x the peak 60
  EXPECT_EQ(reserve_bound(2.0, 60 * MiB, 30 * MiB, 20 * MiB, 100 * MiB), 100 * MiB);  // 120 > the capacity
}

}  // namespace
}  // namespace vram::detail
