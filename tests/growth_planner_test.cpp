// The growth planner on books set up by hand (no device): where a block goes in mapped memory, by best fit
// or by the least memory pinned, and where growth maps memory for it: the top of the zone, a hole once the
// arena is lean, a free end of a handle elsewhere (an alias) once it is tight. Zones of 2 MiB granules; offsets in MiB from the zone's base.
#include <gtest/gtest.h>

#include "vram/pool/growth_planner.hpp"

namespace vram::detail {
namespace {

constexpr device_ptr base = device_ptr{1} << 32;

struct books {
  handle_map m{base, 32 * MiB, 1, 2 * MiB};
  // A 2 MiB handle mapped at `at` (MiB) with a live block over [at + live_from, at + live_to) MiB and the rest free.
  void handle_with_block(double at, double live_from, double live_to) {
    const device_ptr va = base + static_cast<device_ptr>(at * MiB);
    m.add_view(m.add_handle(1, 2 * MiB), va);
    const auto lo = static_cast<std::size_t>(live_from * MiB), hi = static_cast<std::size_t>(live_to * MiB);
    if (lo > 0) m.free_insert(va, lo);
    if (hi < 2 * MiB) m.free_insert(va + hi, 2 * MiB - hi);
    if (hi > lo) m.touch(va + lo, hi - lo);
  }
};

growth_settings settings(pressure level, std::size_t cap = 64 * MiB) { return {cap, level, true}; }

TEST(GrowthPlanner, MappedMemoryByBestFitOrByTheLeastPinned) {
  books b;
  // H0 [0, 2) with a block in [0, 1.5); H1 [2, 4) cold; H2 [4, 6) with a block in [5, 6). Free: [1.5, 5).
  b.handle_with_block(0, 0, 1.5);
  b.handle_with_block(2, 0, 0);
  b.handle_with_block(4, 1, 2);
  // Best fit: the start of the one range, wherever that lands.
  auto p = plan_mapped(b.m, MiB, 512, 0, false);
  ASSERT_TRUE(p.valid);
  EXPECT_FALSE(p.grows);
  EXPECT_EQ(p.block, base + 3 * MiB / 2);
  EXPECT_EQ(p.leftover, 5 * MiB / 2);
  // By pinning: [1.5, 2.5) would pin the cold H1 (2 MiB); the range's other end, [4, 5), lies in H2, busy.
  p = plan_mapped(b.m, MiB, 512, 0, true);
  ASSERT_TRUE(p.valid);
  EXPECT_EQ(p.block, base + 4 * MiB);
  EXPECT_EQ(p.pinned, 0u);
  // Nothing mapped holds 4 MiB.
  EXPECT_FALSE(plan_mapped(b.m, 4 * MiB, 512, 0, true).valid);
}

TEST(GrowthPlanner, GrowthAtTheTopExtendsTheFreeMemoryBelowIt) {
  books b;
  b.handle_with_block(0, 0, 1.5);  // free [1.5, 2) under the top
  // 4 MiB: its first 0.5 MiB in the free end, 3.5 MiB mapped anew: two granules from 2 MiB.
  auto p = plan_growth(b.m, b.m.pieces(), 4 * MiB, 512, 0, false, settings(pressure::roomy));
  ASSERT_TRUE(p.valid);
  EXPECT_TRUE(p.grows);
  EXPECT_FALSE(p.in_hole);
  EXPECT_EQ(p.block, base + 3 * MiB / 2);
  EXPECT_EQ(p.map_at, base + 2 * MiB);
  EXPECT_EQ(p.need, 4 * MiB);
  EXPECT_EQ(p.pinned, 4 * MiB);  // only the new memory: H0 is busy
  EXPECT_EQ(p.calls, 1u);        // one 4 MiB handle
  // Handles of at most one granule: two calls.
  p = plan_growth(b.m, b.m.pieces(), 4 * MiB, 512, 0, false, settings(pressure::roomy, 2 * MiB));
  EXPECT_EQ(p.calls, 2u);
  EXPECT_EQ(p.need, 4 * MiB);
}

TEST(GrowthPlanner, ALeanArenaFillsAHoleWhereARoomyOneGrowsAtTheTop) {
  books b;
  // H0 [0, 2) all live; a hole [2, 6); H1 [6, 8): free [6, 7), a block in [7, 8); the top from 8.
  b.handle_with_block(0, 0, 2);
  b.handle_with_block(6, 1, 2);
  // 5 MiB. Roomy: at the top, 3 granules mapped anew at 8 MiB.
  auto p = plan_growth(b.m, b.m.pieces(), 5 * MiB, 512, 0, false, settings(pressure::roomy));
  ASSERT_TRUE(p.valid);
  EXPECT_EQ(p.block, base + 8 * MiB);
  EXPECT_EQ(p.need, 6 * MiB);
  EXPECT_EQ(p.pinned, 6 * MiB);
  EXPECT_FALSE(p.in_hole);
  // Lean: the hole, filled with 4 MiB mapped anew, the block's last MiB in H1's free start: 2 MiB less.
  p = plan_growth(b.m, b.m.pieces(), 5 * MiB, 512, 0, false, settings(pressure::lean));
  ASSERT_TRUE(p.valid);
  EXPECT_TRUE(p.in_hole);
  EXPECT_EQ(p.block, base + 2 * MiB);
  EXPECT_EQ(p.map_at, base + 2 * MiB);
  EXPECT_EQ(p.need, 4 * MiB);
  EXPECT_EQ(p.pinned, 4 * MiB);
  EXPECT_EQ(p.leftover, 0u);
  EXPECT_EQ(p.head_use + p.tail_use, 0u);  // no alias
  // A block that the hole cannot take (7 MiB > 4 + 1) goes to the top even when lean: 4 granules at 8 MiB.
  p = plan_growth(b.m, b.m.pieces(), 7 * MiB, 512, 0, false, settings(pressure::lean));
  EXPECT_EQ(p.block, base + 8 * MiB);
  EXPECT_EQ(p.need, 8 * MiB);
}

TEST(GrowthPlanner, ATightArenaGrowsALargeFreeRangeIntoTheSmallGapBesideIt) {
  books b;
  // H0 [0, 2) all live; H1..H5 [2, 12) cold: the free range [2, 12); a gap [12, 14); H6 [14, 16) all live;
  // the top from 16. An 11 MiB block fits no free range.
  b.handle_with_block(0, 0, 2);
  for (double at = 2; at < 12; at += 2) b.handle_with_block(at, 0, 0);
  b.handle_with_block(14, 0, 2);
  const std::size_t s = 11 * MiB;
  // Lean: only gaps of at least s - 4 granules (3 MiB) are looked at, so not [12, 14): the block grows at the
  // top, 6 granules mapped anew at 16 MiB, pinning those 12 MiB.
  auto p = plan_growth(b.m, b.m.pieces(), s, 512, 0, false, settings(pressure::lean));
  ASSERT_TRUE(p.valid);
  EXPECT_EQ(p.block, base + 16 * MiB);
  EXPECT_EQ(p.need, 12 * MiB);
  // Tight: the gap beside the largest free range is looked at too. The block starts at 2 MiB, its first
  // 10 MiB in the free range and its last MiB in one granule mapped at 12 MiB. It pins as much as the top
  // (2 MiB new and the five cold handles under it, 12 MiB; the top's 12 MiB new), in one call as the top,
  // and leaves 1 MiB free where the top leaves the rest of the address space: the hole.
  p = plan_growth(b.m, b.m.pieces(), s, 512, 0, true, settings(pressure::tight));
  ASSERT_TRUE(p.valid);
  EXPECT_TRUE(p.in_hole);
  EXPECT_EQ(p.block, base + 2 * MiB);
  EXPECT_EQ(p.map_at, base + 12 * MiB);
  EXPECT_EQ(p.need, 2 * MiB);
  EXPECT_EQ(p.pinned, 12 * MiB);
  EXPECT_EQ(p.calls, 1u);
  EXPECT_EQ(p.leftover, MiB);
}

TEST(GrowthPlanner, ATightArenaPutsABlocksFirstBytesInAFreeEndElsewhere) {
  books b;
  // H0 [0, 2): a block in [0, 1.5), its free end [1.5, 2) beside a gap [2, 4) too small for the block;
  // H1 [4, 6) all live; the top from 6.
  b.handle_with_block(0, 0, 1.5);
  b.handle_with_block(4, 0, 2);
  b.m.keep_pieces(true);
  ASSERT_EQ(b.m.pieces().length_at(piece_index::side::suffix, base + 2 * MiB), MiB / 2);
  // 4.5 MiB. Short of tight: at the top, 3 granules at 6 MiB.
  auto p = plan_growth(b.m, b.m.pieces(), 9 * MiB / 2, 512, 0, false, settings(pressure::lean));
  ASSERT_TRUE(p.valid);
  EXPECT_EQ(p.block, base + 6 * MiB);
  EXPECT_EQ(p.need, 6 * MiB);
  EXPECT_EQ(p.head_use, 0u);
  // Tight: its first 0.5 MiB in H0's free end, mapped again in a fresh range ahead of 4 MiB of new memory.
  // It pins 4 MiB (H0 is busy already) where the top pins 6, in one call more.
  p = plan_growth(b.m, b.m.pieces(), 9 * MiB / 2, 512, 0, true, settings(pressure::tight));
  ASSERT_TRUE(p.valid);
  EXPECT_TRUE(p.fresh);
  EXPECT_EQ(p.need, 4 * MiB);
  EXPECT_EQ(p.head_use, MiB / 2);
  EXPECT_EQ(p.head.at, base + 3 * MiB / 2);
  EXPECT_EQ(p.head.handle_bytes, 2 * MiB);
  EXPECT_EQ(p.tail_use, 0u);
  EXPECT_EQ(p.pinned, 4 * MiB);
  EXPECT_EQ(p.calls, 2u);
  // Tight with aliasing off: the top again.
  p = plan_growth(b.m, b.m.pieces(), 9 * MiB / 2, 512, 0, true, {64 * MiB, pressure::tight, false});
  EXPECT_EQ(p.block, base + 6 * MiB);
  EXPECT_EQ(p.head_use, 0u);
  // Tight, aliasing on, but the block larger than the largest that may take aliases: the top again; a block
  // of exactly that size still takes the free end.
  p = plan_growth(b.m, b.m.pieces(), 9 * MiB / 2, 512, 0, true, {64 * MiB, pressure::tight, true, 4 * MiB});
  EXPECT_EQ(p.block, base + 6 * MiB);
  EXPECT_EQ(p.head_use, 0u);
  EXPECT_EQ(p.need, 6 * MiB);
  p = plan_growth(b.m, b.m.pieces(), 9 * MiB / 2, 512, 0, true, {64 * MiB, pressure::tight, true, 9 * MiB / 2});
  EXPECT_TRUE(p.fresh);
  EXPECT_EQ(p.head_use, MiB / 2);
}

TEST(GrowthPlanner, PlansCompareByPinningWhenTightAndByGrowingOtherwise) {
  growth_plan mapped_pinning, grown;
  mapped_pinning.pinned = 2 * MiB;  // mapped memory that pins a cold handle
  grown.grows = true;
  grown.pinned = MiB;               // growth that maps less
  EXPECT_LT(mapped_pinning.key(false), grown.key(false));
  EXPECT_LT(grown.key(true), mapped_pinning.key(true));
}

}  // namespace
}  // namespace vram::detail
