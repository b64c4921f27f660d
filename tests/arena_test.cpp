// vram's arena on a small simulated device (2 MiB granules, so every handle is one or a few granules):
// placement by least memory pinned once the device is tight, growth into holes, aliases of a handle's free
// ends, and the ownership bookkeeping behind them, with the answers worked out by hand. validate() runs
// after every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "vram/device/sim_device.hpp"
#include "vram/pool/arena.hpp"

namespace vram {
namespace {

using detail::arena;
using detail::arena_options;

sim_device_options small_device(std::size_t capacity = 12 * MiB) {
  sim_device_options o;
  o.capacity = capacity;
  o.costs = cost_model::zero();
  return o;
}

arena_options one_zone(std::size_t limit = 0, bool aliasing = true) {
  arena_options o;
  o.zones = 1;
  o.limit = limit;
  o.aliasing = aliasing;
  return o;
}

std::uint64_t calls(const sim_device& d, device_call c) { return d.calls().calls(c); }

// How many handles are mapped at exactly these addresses, in this order.
std::ptrdiff_t handles_mapped_at(const arena& ar, const std::vector<device_ptr>& views) {
  const auto handles = ar.handles();
  return std::count_if(handles.begin(), handles.end(), [&](const arena::handle_view& h) { return h.views == views; });
}

// a = [0, 1.5) in handle H0 = [0, 2); x = [1.5, 5.5) over H0's end, H1 = [2, 4) and H2 = [4, 6); c = [5.5, 6).
// Freeing x leaves H1 cold and free memory [1.5, 5.5) MiB. Offsets are from the zone's base.
struct three_blocks {
  sim_device dev;
  arena ar;
  device_ptr base, a, c;
  explicit three_blocks(arena_options o) : dev(small_device()), ar(dev, o), base(ar.zone_base(0)) {
    a = ar.allocate(3 * MiB / 2, 512);
    const device_ptr x = ar.allocate(4 * MiB, 512);
    c = ar.allocate(MiB / 2, 512);
    EXPECT_EQ(a, base);
    EXPECT_EQ(x, base + 3 * MiB / 2);  // extends the free half granule at the top
    EXPECT_EQ(c, base + 11 * MiB / 2);  // the free half granule left at the top
    EXPECT_EQ(ar.reserved(), 6 * MiB);
    ar.deallocate(x, 4 * MiB);
    ar.validate();
  }
};

TEST(Arena, ADeviceWithoutTheAddressSpaceForItsZonesGetsSmallerOnes) {
  // The simulated device's mappings have 192 TiB of addresses. Three zones of 8x a 9 TiB device want 216 TiB,
  // so each zone gets 4x (36 TiB); of 8x a 4 TiB device, 96 TiB, which fits as it is.
  for (const auto& [capacity, factor] : {std::pair{std::size_t{9} << 40, std::size_t{4}}, {std::size_t{4} << 40, 8}}) {
    sim_device_options d = small_device(capacity);
    d.granularity = std::size_t{1} << 30;  // few granules to keep books of
    sim_device dev(d);
    arena_options o;
    o.zones = 3;
    arena ar(dev, o);
    EXPECT_EQ(ar.zone_span(), factor * capacity);
    EXPECT_EQ(ar.span(), 3 * factor * capacity);
    const device_ptr p = ar.allocate(5 * MiB, 512, 2);
    EXPECT_EQ(p, ar.zone_base(2));
    EXPECT_EQ(ar.reserved(), std::size_t{1} << 30);
    ar.deallocate(p, 5 * MiB);
    ar.validate();
  }
}

TEST(Arena, OnATightDeviceABlockUsesTheFreeEndOfAHandleMappedElsewhere) {
  three_blocks t(one_zone(8 * MiB));
  // 5 MiB fits no free range. Growth at the top needs 6 MiB (3 granules) and the limit leaves 2: H1 is
  // recycled and one handle made, the next refused. Recovery then sees the gap H1 left at [2, 4): beside it
  // H2's free prefix [4, 5.5). The block takes 4 MiB in two whole granules (H1 and the new handle) at the top
  // [6, 10) and its last 1 MiB from H2, mapped a second time at [10, 12): 4 MiB mapped anew instead of 6.
  const device_ptr z = t.ar.allocate(5 * MiB, 512);
  ASSERT_NE(z, 0u);
  t.ar.validate();
  EXPECT_EQ(z, t.base + 6 * MiB);
  EXPECT_EQ(t.ar.reserved(), 8 * MiB);
  EXPECT_EQ(t.ar.in_use(), 7 * MiB);
  EXPECT_EQ(t.ar.counters().aliases_mapped, 1u);
  EXPECT_EQ(t.ar.counters().aliased_growths, 1u);
  EXPECT_EQ(t.ar.counters().out_of_memory_recoveries, 1u);
  EXPECT_EQ(calls(t.dev, device_call::mem_create), 4u);
  EXPECT_EQ(calls(t.dev, device_call::mem_unmap), 1u);
  EXPECT_EQ(calls(t.dev, device_call::mem_map), 6u);  // H0, H1, H2; H1 again, the new one, H2's alias
  // Free now: H0's [1.5, 2) and what H2's first view still owns, [5, 5.5): 8 mapped - 7 in use.
  EXPECT_EQ(t.ar.free_memory().total, 1 * MiB);
  const auto ranges = t.ar.free_ranges();
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], std::make_pair(t.base + 3 * MiB / 2, MiB / 2));
  EXPECT_EQ(ranges[1], std::make_pair(t.base + 5 * MiB, MiB / 2));
  // H2 is mapped twice: at 4 MiB and at 10 MiB.
  EXPECT_EQ(handles_mapped_at(t.ar, {t.base + 4 * MiB, t.base + 10 * MiB}), 1);
  // Freeing the block gives its alias bytes back at the new view; once c goes too, H2 is cold and trim()
  // unmaps both of its views.
  t.ar.deallocate(z, 5 * MiB);
  t.ar.validate();
  t.ar.deallocate(t.c, MiB / 2);
  t.ar.validate();
  EXPECT_EQ(t.ar.trim(), 6 * MiB);  // every handle but H0 (a)
  t.ar.validate();
  EXPECT_EQ(calls(t.dev, device_call::mem_unmap), 1u + 4u);  // H1's new view, the new handle, both of H2's
  EXPECT_EQ(t.ar.reserved(), 2 * MiB);
}

TEST(Arena, AnAliasViewLeftWithNoLiveBlockGivesItsBytesBackBeforeTheNextGrowth) {
  three_blocks t(one_zone(8 * MiB));
  const device_ptr z = t.ar.allocate(5 * MiB, 512);  // as above: z = [6, 11), its last 1 MiB H2's first
  ASSERT_EQ(z, t.base + 6 * MiB);
  // Freed, z leaves [6, 11) free: the handles at [6, 10) cold, and H2's first 1 MiB owned by its view at
  // [10, 12), which holds no live block now. H2 stays busy through c at its first view, so nothing is
  // unmapped yet.
  t.ar.deallocate(z, 5 * MiB);
  t.ar.validate();
  EXPECT_EQ(calls(t.dev, device_call::mem_unmap), 1u);
  EXPECT_EQ(t.ar.counters().views_dissolved, 0u);
  // The next request on the tight arena first dissolves that view: H2's first 1 MiB passes back to its first
  // view, where it joins [5, 5.5) into H2's free prefix [4, 5.5), and [10, 12) is unmapped. The 512 bytes
  // then go to the best fit that pins nothing cold: [1.5, 2) in H0.
  const device_ptr y = t.ar.allocate(512, 512);
  t.ar.validate();
  EXPECT_EQ(y, t.base + 3 * MiB / 2);
  EXPECT_EQ(t.ar.counters().views_dissolved, 1u);
  EXPECT_EQ(calls(t.dev, device_call::mem_unmap), 2u);
  const auto ranges = t.ar.free_ranges();
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0], std::make_pair(t.base + 3 * MiB / 2 + 512, MiB / 2 - 512));
  EXPECT_EQ(ranges[1], std::make_pair(t.base + 4 * MiB, 3 * MiB / 2));
  EXPECT_EQ(ranges[2], std::make_pair(t.base + 6 * MiB, 4 * MiB));
  EXPECT_EQ(handles_mapped_at(t.ar, {t.base + 4 * MiB}), 1);
  EXPECT_EQ(t.ar.reserved(), 8 * MiB);
}

TEST(Arena, AViewOfAColdHandleGivesItsBytesBackOnceAnotherViewHoldsABlockAgain) {
  three_blocks t(one_zone(8 * MiB));
  const device_ptr z = t.ar.allocate(5 * MiB, 512);  // z = [6, 11), its last 1 MiB H2's first, at [10, 12)
  ASSERT_EQ(z, t.base + 6 * MiB);
  // With z and c freed, H2 is cold with both views: the one at [4, 6) owns [5, 6) (its first 1 MiB there is
  // foreign), the alias at [10, 12) owns [10, 11). The free memory is [1.5, 2) and [5, 11), coalesced.
  t.ar.deallocate(z, 5 * MiB);
  t.ar.deallocate(t.c, MiB / 2);
  t.ar.validate();
  // 1 MiB on the tight, full arena: either end of [5, 11) pins H2 (2 MiB), as would any growth, which must
  // recycle a cold handle under the limit; mapped memory wins the tie, at its lower end. Nothing is given
  // back first: H2 is cold, so neither view holds a block another view could take the bytes into.
  const device_ptr b = t.ar.allocate(MiB, 512);
  t.ar.validate();
  EXPECT_EQ(b, t.base + 5 * MiB);
  EXPECT_EQ(t.ar.counters().views_dissolved, 0u);
  // H2 is busy again, through its first view only. The next request dissolves the alias: its 1 MiB passes to
  // the first view at [4, 5) and [10, 12) is unmapped. The 512 bytes take the best fit, [1.5, 2) in H0.
  const device_ptr y = t.ar.allocate(512, 512);
  t.ar.validate();
  EXPECT_EQ(y, t.base + 3 * MiB / 2);
  EXPECT_EQ(t.ar.counters().views_dissolved, 1u);
  EXPECT_EQ(calls(t.dev, device_call::mem_unmap), 2u);  // H1 under z's growth, then the alias
  const auto ranges = t.ar.free_ranges();
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0], std::make_pair(t.base + 3 * MiB / 2 + 512, MiB / 2 - 512));
  EXPECT_EQ(ranges[1], std::make_pair(t.base + 4 * MiB, MiB));
  EXPECT_EQ(ranges[2], std::make_pair(t.base + 6 * MiB, 4 * MiB));
  EXPECT_EQ(handles_mapped_at(t.ar, {t.base + 4 * MiB}), 1);
  EXPECT_EQ(t.ar.reserved(), 8 * MiB);
}

TEST(Arena, AColdHandleAliasedElsewhereGivesBackWhatItsFirstViewStillOwns) {
  sim_device dev(small_device());
  arena ar(dev, one_zone(10 * MiB));
  const device_ptr base = ar.zone_base(0);
  // [0, 3) over H0 = [0, 2) and H1 = [2, 4); [3, 8) extends the top, over H2 = [4, 6) and H3 = [6, 8).
  const device_ptr a = ar.allocate(3 * MiB, 512);
  const device_ptr x = ar.allocate(5 * MiB, 512);
  ASSERT_EQ(a, base);
  ASSERT_EQ(x, base + 3 * MiB);
  ar.deallocate(a, 3 * MiB);  // H0 cold
  // 5 MiB more, 2 MiB left under the limit: the block goes at the top, [8, 13): a new handle at [8, 10), H0
  // recycled to [10, 12), and its last 1 MiB from H1's free start, [2, 3), mapped a second time at [12, 14).
  const device_ptr y = ar.allocate(5 * MiB, 512);
  ASSERT_EQ(y, base + 8 * MiB);
  ASSERT_EQ(ar.counters().aliases_mapped, 1u);
  ASSERT_EQ(calls(dev, device_call::mem_unmap), 1u);
  ar.deallocate(x, 5 * MiB);  // H2 and H3 cold; H1's first view holds no block now
  ar.validate();
  // 2.5 MiB: first H1's first view gives its [3, 4) to the alias, [13, 14), and is unmapped (the gap [2, 4)).
  // Then the block takes [13, 14) and its last 1.5 MiB from the free start of the cold H2, beside that gap,
  // mapped a second time at [14, 16): [13, 15.5). H2's last 0.5 MiB stay with its first view, [5.5, 6).
  const device_ptr z = ar.allocate(5 * MiB / 2, 512);
  ar.validate();
  ASSERT_EQ(z, base + 13 * MiB);
  EXPECT_EQ(ar.counters().aliases_mapped, 2u);
  EXPECT_EQ(ar.counters().views_dissolved, 1u);
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 2u);  // H0 from [0, 2), H1's first view
  auto ranges = ar.free_ranges();
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0], std::make_pair(base + 11 * MiB / 2, 5 * MiB / 2));
  // H2 was cold, with one view, when the alias was mapped: no free left its first view holding no block, yet
  // that view is listed too. The next request gives its 0.5 MiB to the alias, [15.5, 16), and unmaps it;
  // the block then fits there, pinning nothing (in H3 it would pin a cold handle).
  const device_ptr w = ar.allocate(MiB / 2, 512);
  ar.validate();
  EXPECT_EQ(w, base + 31 * MiB / 2);
  EXPECT_EQ(ar.counters().views_dissolved, 2u);
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 3u);
  ranges = ar.free_ranges();
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0], std::make_pair(base + 6 * MiB, 2 * MiB));
  EXPECT_EQ(handles_mapped_at(ar, {base + 14 * MiB}), 1);
  EXPECT_EQ(ar.reserved(), 10 * MiB);
}

TEST(Arena, BeforeFailingAGrowthUsesTheFreeEndOfAHandleWithNoGapBesideIt) {
  sim_device dev(small_device());
  arena ar(dev, one_zone(6 * MiB));
  const device_ptr base = ar.zone_base(0);
  const device_ptr x = ar.allocate(3 * MiB / 2, 512);  // [0, 1.5) in H0 = [0, 2)
  const device_ptr w = ar.allocate(MiB / 2, 512);      // [1.5, 2), the rest of H0
  const device_ptr y = ar.allocate(2 * MiB, 512);      // [2, 4): H1, at the top
  ASSERT_EQ(x, base);
  ASSERT_EQ(w, base + 3 * MiB / 2);
  ASSERT_EQ(y, base + 2 * MiB);
  ar.deallocate(w, MiB / 2);
  ar.validate();
  // 2.5 MiB with 2 MiB left under the limit and no cold handle: at the top it needs two granules, and the
  // only free memory, H0's last 0.5 MiB, has H1 mapped after it, not a gap, so it is no piece. As a last try
  // the free end of every handle is a piece: H0 mapped again at the lowest free address range, [4, 6), holds
  // the block's first 0.5 MiB, and one new handle at [6, 8) the rest: [5.5, 8).
  const device_ptr z = ar.allocate(5 * MiB / 2, 512);
  ar.validate();
  EXPECT_EQ(z, base + 11 * MiB / 2);
  EXPECT_EQ(ar.counters().last_resort_growths, 1u);
  EXPECT_EQ(ar.counters().aliases_mapped, 1u);
  EXPECT_EQ(ar.reserved(), 6 * MiB);
  EXPECT_EQ(ar.free_memory().total, 0u);
  EXPECT_EQ(calls(dev, device_call::mem_create), 3u);
  EXPECT_EQ(handles_mapped_at(ar, {base, base + 4 * MiB}), 1);
  // Freed, it leaves 2.5 MiB free and nothing more to reserve: 3 MiB fail, the last try too. Before trying,
  // the alias gave its 0.5 MiB back to H0's first view; on the failure the new handle, cold, went back to the
  // device.
  ar.deallocate(z, 5 * MiB / 2);
  ar.validate();
  EXPECT_EQ(ar.allocate(3 * MiB, 512), 0u);
  ar.validate();
  EXPECT_EQ(ar.counters().last_resort_growths, 1u);
  EXPECT_EQ(ar.reserved(), 4 * MiB);
  const auto ranges = ar.free_ranges();
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0], std::make_pair(base + 3 * MiB / 2, MiB / 2));
}

TEST(Arena, ThePieceIndexDroppedWhileRoomyIsBuiltAgainFromTheGaps) {
  three_blocks t(one_zone());
  EXPECT_FALSE(t.ar.pieces_indexed());  // never tight yet
  // Tight once (6 MiB reserved under a 6 MiB limit): a 512-byte block in mapped memory, and the index is
  // built; 1024 requests on a roomy arena drop it; the alias of the first test is then found from the gaps.
  t.ar.set_limit(6 * MiB);
  t.ar.deallocate(t.ar.allocate(512, 512), 512);
  EXPECT_TRUE(t.ar.pieces_indexed());
  t.ar.validate();
  t.ar.set_limit(64 * MiB);
  for (int i = 0; i < 1023; ++i) t.ar.deallocate(t.ar.allocate(512, 512), 512);
  EXPECT_TRUE(t.ar.pieces_indexed());
  t.ar.deallocate(t.ar.allocate(512, 512), 512);
  EXPECT_FALSE(t.ar.pieces_indexed());
  t.ar.validate();
  t.ar.set_limit(8 * MiB);
  const device_ptr z = t.ar.allocate(5 * MiB, 512);
  EXPECT_TRUE(t.ar.pieces_indexed());
  t.ar.validate();
  EXPECT_EQ(z, t.base + 6 * MiB);
  EXPECT_EQ(t.ar.counters().aliases_mapped, 1u);
  EXPECT_EQ(t.ar.reserved(), 8 * MiB);
}

TEST(Arena, WithoutAliasesTheSameRequestFails) {
  three_blocks t(one_zone(8 * MiB, /*aliasing=*/false));
  // The same 5 MiB needs 3 whole granules, the limit allows 2 more than H0 and H2.
  EXPECT_EQ(t.ar.allocate(5 * MiB, 512), 0u);
  t.ar.validate();
  EXPECT_EQ(t.ar.counters().aliases_mapped, 0u);
  // The handles made or recycled for it went back to the device: H0 and H2 remain.
  EXPECT_EQ(t.ar.reserved(), 4 * MiB);
}

TEST(Arena, ABlockInOneZoneUsesTheFreeEndOfAHandleInAnother) {
  // Physical memory is shared by the zones, and so are the pieces. Zone 0: a = [0, 1.5) MiB in H0, whose free
  // end [1.5, 2) lies before the unmapped rest of the zone. Zone 1 is empty. Under a 6 MiB limit, 4.5 MiB in
  // zone 1 would need 3 new granules at its start (2 + 6 > 6); instead its first 0.5 MiB is H0's free end,
  // H0 mapped a second time at zone 1's start, and the other 4 MiB two new granules after it: the block is
  // [1.5, 6) MiB from zone 1's base.
  arena_options o = one_zone(6 * MiB);
  o.zones = 2;
  sim_device dev(small_device());
  arena ar(dev, o);
  const device_ptr z0 = ar.zone_base(0), z1 = ar.zone_base(1);
  const device_ptr a = ar.allocate(3 * MiB / 2, 512, 0);
  ASSERT_EQ(a, z0);
  const device_ptr x = ar.allocate(9 * MiB / 2, 512, 1);
  ASSERT_NE(x, 0u);
  ar.validate();
  EXPECT_EQ(x, z1 + 3 * MiB / 2);
  EXPECT_EQ(ar.reserved(), 6 * MiB);
  EXPECT_EQ(ar.in_use(), 6 * MiB);
  EXPECT_EQ(ar.free_memory().total, 0u);  // H0's free end now belongs to its view in zone 1, under x
  EXPECT_EQ(ar.counters().aliases_mapped, 1u);
  EXPECT_EQ(ar.counters().out_of_memory_recoveries, 0u);
  EXPECT_EQ(calls(dev, device_call::mem_create), 3u);  // H0 and the two granules
  EXPECT_EQ(calls(dev, device_call::mem_map), 4u);     // H0 twice, the two granules
  EXPECT_EQ(handles_mapped_at(ar, {z0, z1}), 1);
  // Both blocks freed, every handle is cold and trim() gives all 6 MiB back, unmapping H0's two views.
  ar.deallocate(x, 9 * MiB / 2);
  ar.validate();
  ar.deallocate(a, 3 * MiB / 2);
  ar.validate();
  EXPECT_EQ(ar.trim(), 6 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 4u);
  ar.validate();
}

TEST(Arena, TwoPiecesOfLargeHandlesCanHoldMoreThanAGranuleOfABlock) {
  // An 8 GiB device: handles up to 8 MiB (1/1024 of it), each the size its growth needs. Built, in MiB from
  // the zone's base: Hp = [0, 2), H1 = [2, 6) with c = [5, 6), H0 = [6, 10) with a = [6, 7), Hq = [10, 12),
  // Hr = [12, 14) full; then Hp and Hq are trimmed. H1's free start [2, 5) follows the gap [0, 2) (a prefix),
  // H0's free end [7, 10) precedes the gap [10, 12) (a suffix): 3 MiB each, the handles 4 MiB.
  sim_device dev(small_device(std::size_t{8} << 30));
  arena ar(dev, one_zone());
  const device_ptr base = ar.zone_base(0);
  const device_ptr p = ar.allocate(2 * MiB, 512);
  const device_ptr w = ar.allocate(3 * MiB, 512);
  const device_ptr c = ar.allocate(1 * MiB, 512);
  const device_ptr y = ar.allocate(4 * MiB, 512);
  const device_ptr q = ar.allocate(2 * MiB, 512);
  const device_ptr r = ar.allocate(2 * MiB, 512);
  EXPECT_EQ(std::vector<device_ptr>({p, w, c, y, q, r}),
            std::vector<device_ptr>({base, base + 2 * MiB, base + 5 * MiB, base + 6 * MiB, base + 10 * MiB,
                                     base + 12 * MiB}));
  ar.deallocate(y, 4 * MiB);
  const device_ptr a = ar.allocate(1 * MiB, 512);
  EXPECT_EQ(a, base + 6 * MiB);
  ar.deallocate(w, 3 * MiB);
  ar.deallocate(p, 2 * MiB);
  ar.deallocate(q, 2 * MiB);
  EXPECT_EQ(ar.trim(), 4 * MiB);
  ar.validate();
  // With no room left, 6 MiB fits no free range, and no gap holds it beside a piece. The two pieces hold all
  // of it: 6 = 0 (mod 2 MiB), three granules' worth. In fresh address space (the top, from 14 MiB) H0 is
  // mapped at [14, 18) so that its free end falls at [15, 18), and H1 at [18, 22), its free start at
  // [18, 21): the block is [15, 21), with no memory created. Pairs only up to one granule beyond the residue
  // (2 MiB) would need 2 MiB more, which the limit refuses.
  ar.set_limit(10 * MiB);
  const device_ptr z = ar.allocate(6 * MiB, 512);
  ASSERT_NE(z, 0u);
  ar.validate();
  EXPECT_EQ(z, base + 15 * MiB);
  EXPECT_EQ(ar.reserved(), 10 * MiB);
  EXPECT_EQ(ar.in_use(), 10 * MiB);
  EXPECT_EQ(ar.free_memory().total, 0u);
  EXPECT_EQ(ar.counters().aliases_mapped, 2u);
  EXPECT_EQ(ar.counters().aliased_growths, 1u);
  EXPECT_EQ(calls(dev, device_call::mem_create), 5u);
  EXPECT_EQ(handles_mapped_at(ar, {base + 6 * MiB, base + 14 * MiB}), 1);
  EXPECT_EQ(handles_mapped_at(ar, {base + 2 * MiB, base + 18 * MiB}), 1);
  ar.deallocate(z, 6 * MiB);
  ar.validate();
  EXPECT_EQ(ar.free_memory().total, 6 * MiB);
}

TEST(Arena, OnATightDeviceABlockFillsAHoleBetweenMappedMemory) {
  three_blocks t(one_zone());
  EXPECT_EQ(t.ar.trim(), 2 * MiB);  // H1 goes: a gap at [2, 4) between H0's free [1.5, 2) and H2's [4, 5.5)
  t.ar.set_limit(6 * MiB);          // 2 MiB left: tight for what follows
  // 3.5 MiB: from 1.5 MiB it runs through the gap into H2's free memory, mapping one granule where the top
  // would need two.
  const device_ptr y = t.ar.allocate(7 * MiB / 2, 512);
  t.ar.validate();
  EXPECT_EQ(y, t.base + 3 * MiB / 2);
  EXPECT_EQ(t.ar.reserved(), 6 * MiB);
  EXPECT_EQ(t.ar.counters().hole_growths, 1u);
  EXPECT_EQ(t.ar.free_memory().total, MiB / 2);  // [5, 5.5)
}

// H1 trimmed (a gap at [2, 4) between H0's free [1.5, 2) and H2's [4, 5.5)), then a block of 3.5 MiB placed:
// its address.
device_ptr trim_and_place_three_and_a_half(three_blocks& t) {
  EXPECT_EQ(t.ar.trim(), 2 * MiB);
  const device_ptr y = t.ar.allocate(7 * MiB / 2, 512);
  t.ar.validate();
  return y;
}

arena_options lean(double reserve_ratio) {
  arena_options o = one_zone();
  o.reserve_ratio = reserve_ratio;
  return o;
}

TEST(Arena, NearItsReserveBoundARoomyArenaFillsAHoleToo) {
  // The same hole on the 12 MiB device without a limit. In use 2 MiB (a and c), peak 6 MiB (a, x, c),
  // reserved 4 MiB. For 3.5 MiB the cache budget beside it is 0.05 x (2 + 3.5) + 3.5 = 3.775 MiB.
  // The device leaves 8 MiB: not tight. Under reserve_ratio 1.11 the bound is 1.11 x max(6, 5.5) = 6.66 MiB,
  // which leaves 2.66: lean, so the block goes through the hole, mapping one granule, as on a tight device.
  three_blocks t(lean(1.11));
  EXPECT_EQ(trim_and_place_three_and_a_half(t), t.base + 3 * MiB / 2);
  EXPECT_EQ(t.ar.reserved(), 6 * MiB);
  EXPECT_EQ(t.ar.counters().hole_growths, 1u);
  // x's growth was lean too (1.11 x 5.5 = 6.105 MiB leaves 4.105 with 2 reserved, under 0.05 x 5.5 + 4 =
  // 4.275), though on an arena with no hole yet it grew at the top all the same.
  EXPECT_EQ(t.ar.counters().lean_growths, 2u);
  EXPECT_EQ(t.ar.counters().aliases_mapped, 0u);  // aliases are for a tight arena only
}

TEST(Arena, FarFromItsReserveBoundOrWithoutOneItGrowsAtTheTop) {
  // reserve_ratio 2: the bound 12 MiB (the device) leaves 8 MiB; reserve_ratio 0: no bound. Either way the
  // 3.5 MiB goes on top of c, at [6, 9.5), in two new granules.
  for (const double ratio : {2.0, 0.0}) {
    three_blocks t(lean(ratio));
    EXPECT_EQ(trim_and_place_three_and_a_half(t), t.base + 6 * MiB) << ratio;
    EXPECT_EQ(t.ar.reserved(), 8 * MiB) << ratio;
    EXPECT_EQ(t.ar.counters().hole_growths, 0u) << ratio;
    EXPECT_EQ(t.ar.counters().lean_growths, 0u) << ratio;
  }
}

TEST(Arena, BelowItsPeakInUseAGrowthFillsAHoleAboveItTheTop) {
  // holes_below_peak, no reserve bound, the 12 MiB device: in use 2 MiB (a and c), peak 6 MiB, reserved 4
  // after the trim. 3.5 MiB keeps in use at 5.5 MiB, under the peak: it goes through the hole from 1.5 MiB,
  // mapping one granule, where without the rule it goes on top of c in two (FarFromItsReserveBound...).
  arena_options o = one_zone();
  o.holes_below_peak = true;
  {
    three_blocks t(o);
    EXPECT_EQ(trim_and_place_three_and_a_half(t), t.base + 3 * MiB / 2);
    EXPECT_EQ(t.ar.reserved(), 6 * MiB);
    EXPECT_EQ(t.ar.counters().hole_growths, 1u);
    EXPECT_EQ(t.ar.counters().lean_growths, 0u);  // the arena itself is not lean
  }
  // A 1 MiB block in zone 1 first (one granule there): in use 3 MiB, so 3.5 MiB would take it to 6.5, past the
  // peak. The block goes on top of c, at [6, 9.5), in two new granules: reserved 4 + 2 + 4 = 10 MiB.
  o.zones = 2;
  three_blocks t(o);
  EXPECT_EQ(t.ar.trim(), 2 * MiB);
  t.ar.allocate(MiB, 512, 1);
  const device_ptr y = t.ar.allocate(7 * MiB / 2, 512);
  t.ar.validate();
  EXPECT_EQ(y, t.base + 6 * MiB);
  EXPECT_EQ(t.ar.reserved(), 10 * MiB);
  EXPECT_EQ(t.ar.counters().hole_growths, 0u);
}

TEST(Arena, ALeanArenaMakesHandlesFromTheRoomLeftUnderItsBound) {
  // A 64 GiB device: handles may be 64 MiB (1/1024 of it). A first block of 60 MiB in an empty arena:
  // - reserve_ratio 1.11: the bound 1.11 x 60 = 66.6 MiB leaves more than 0.05 x 60 + 60 = 63: not lean,
  //   one handle of 60 MiB;
  // - reserve_ratio 1: the bound is the bytes in use, which leaves nothing: lean, and handles are 1/16 of
  //   what is left, so one granule each: 30 of them.
  for (const auto& [ratio, handles] : {std::pair{1.11, 1u}, std::pair{1.0, 30u}}) {
    sim_device dev(small_device(std::size_t{64} << 30));
    arena ar(dev, lean(ratio));
    const device_ptr p = ar.allocate(60 * MiB, 512);
    ASSERT_NE(p, 0u);
    ar.validate();
    EXPECT_EQ(calls(dev, device_call::mem_create), handles) << ratio;
    EXPECT_EQ(calls(dev, device_call::mem_map), handles) << ratio;
    EXPECT_EQ(ar.reserved(), 60 * MiB) << ratio;
    EXPECT_EQ(ar.counters().lean_growths, handles == 30u ? 1u : 0u) << ratio;
    ar.deallocate(p, 60 * MiB);
  }
}

arena_options block_handles(std::size_t n) {
  arena_options o = one_zone();
  o.block_handles = n;
  return o;
}

TEST(Arena, ABlockOfEightLargestHandlesOrMoreIsMadeOfEightHandles) {
  // A 128 GiB device: handles of up to 64 MiB (max_handle; 1/1024 of the device is 128 MiB). With
  // block_handles 8 a block of 8 x 64 MiB or more is made of handles of 1/8 of it: 1 GiB in 8 of 128 MiB,
  // 1 GiB + 2 MiB in 8 of 128 MiB (an eighth, 128.25 MiB, rounded down to whole granules) and one of 2 MiB,
  // 528 MiB in 8 of 66 MiB. Without it (0), 1 GiB takes 16 handles of 64 MiB and 528 MiB 9 (8 of 64, one of
  // 16).
  for (const auto& [n, bytes, handles] :
       {std::tuple{std::size_t{8}, GiB, 8u}, std::tuple{std::size_t{8}, GiB + 2 * MiB, 9u},
        std::tuple{std::size_t{8}, 528 * MiB, 8u}, std::tuple{std::size_t{0}, GiB, 16u},
        std::tuple{std::size_t{0}, 528 * MiB, 9u}}) {
    sim_device dev(small_device(128 * GiB));
    arena ar(dev, block_handles(n));
    ASSERT_NE(ar.allocate(bytes, 512), 0u);
    ar.validate();
    EXPECT_EQ(calls(dev, device_call::mem_create), handles) << n << " " << bytes;
    EXPECT_EQ(ar.reserved(), bytes) << n << " " << bytes;
  }
  // max_handle 0 asks for handles of one granule, and the rule leaves that alone: 1 GiB in 512 of 2 MiB.
  sim_device dev(small_device(128 * GiB));
  arena_options o = block_handles(8);
  o.max_handle_bytes = 0;
  arena ar(dev, o);
  ASSERT_NE(ar.allocate(GiB, 512), 0u);
  EXPECT_EQ(calls(dev, device_call::mem_create), 512u);
}

TEST(Arena, ABlocksHandlesStayWithinASixteenthOfWhatIsLeft) {
  // An 8 GiB device: handles of up to 8 MiB (1/1024 of it). A block of 6.5 GiB: an eighth of it is 832 MiB,
  // but each handle is at most a sixteenth of what is left when it is made, in whole granules: 512 MiB of
  // 8 GiB, then 480 of 7.5 GiB, 450, 420, 394, 370, 346, 326, 304, 286, 268, 252, 236, 220, 208, 194, 182,
  // 170, 160, 150, 140, 132, 124, 116, 108, 102 (6,650 MiB) and the last 6 MiB: 27 handles. Without the
  // rule, 832 of 8 MiB.
  for (const auto& [n, handles] : {std::pair{std::size_t{8}, 27u}, std::pair{std::size_t{0}, 832u}}) {
    sim_device dev(small_device(8 * GiB));
    arena ar(dev, block_handles(n));
    ASSERT_NE(ar.allocate(13 * GiB / 2, 512), 0u);
    ar.validate();
    EXPECT_EQ(calls(dev, device_call::mem_create), handles) << n;
  }
}

// a = [0, 3) over H0 = [0, 2) and H1 = [2, 4); c = [3, 3.5); then a is freed: H0 is cold, H1 busy (c).
struct cold_and_busy {
  sim_device dev;
  arena ar;
  device_ptr base;
  explicit cold_and_busy(arena_options o) : dev(small_device()), ar(dev, o), base(ar.zone_base(0)) {
    const device_ptr a = ar.allocate(3 * MiB, 512);
    const device_ptr c = ar.allocate(MiB / 2, 512);
    EXPECT_EQ(c, a + 3 * MiB);
    ar.deallocate(a, 3 * MiB);
    ar.validate();
  }
};

TEST(Arena, OnATightDeviceABlockGoesWhereItPinsNoColdHandle) {
  cold_and_busy t(one_zone(4 * MiB));  // the limit is what is held: tight
  // The free range [0, 3): at its start the block would pin cold H0, at its end it lies in busy H1.
  EXPECT_EQ(t.ar.allocate(3 * MiB / 4, 512), t.base + 9 * MiB / 4);
  t.ar.validate();
}

TEST(Arena, ItTurnsTightWithRoomLeftForFewerThanThreeCacheBudgets) {
  // In use 0.5 MiB (c), reserved 4 MiB. For 0.75 MiB the cache budget is 0.05 x (0.5 + 0.75) = 0.0625 MiB.
  // A limit of 4.875 MiB leaves 0.875 MiB: less than 3 budgets beside the block (0.1875 + 0.75 = 0.9375),
  // not less than one (0.8125). With the default tight_budgets of 3 the arena is tight and the block goes
  // where it pins no cold handle, the end of the free range [0, 3), in busy H1; with tight_budgets 1 it is
  // roomy and takes the start of the range, in cold H0.
  for (const auto& [budgets, at] : {std::pair{3.0, 9 * MiB / 4}, std::pair{1.0, std::size_t{0}}}) {
    arena_options o = one_zone(4 * MiB + 7 * MiB / 8);
    o.tight_budgets = budgets;
    cold_and_busy t(o);
    EXPECT_EQ(t.ar.allocate(3 * MiB / 4, 512), t.base + at) << budgets;
    t.ar.validate();
  }
}

TEST(Arena, TheStagesAreJudgedWithACacheBudgetBoundByTheRoomAboveThePeakInUse) {
  // In use 0.5 MiB (c), the peak in use 3.5 MiB (a and c), reserved 4 MiB; 0.75 MiB asked for under a limit of
  // 8 MiB, which leaves 4. With max_cached_ratio 1 the budget beside the block is 1 x (0.5 + 0.75) = 1.25 MiB:
  // tight with less than 3 x 1.25 + 0.75 = 4.5 MiB left, so the block goes where it pins no cold handle, the
  // end of the free range [0, 3) in busy H1. Bound by the room above the peak (stage_room_share 0.4, the
  // default), the ratio is 0.4 x (8 / 3.5 - 1) = 0.514: a budget of 0.643 MiB, tight with less than
  // 2.68 MiB left. The arena is not tight; it is lean (reserved is past 1.12 x 3.5 = 3.92 MiB), and a lean
  // arena takes the start of the best fit, in cold H0.
  for (const auto& [share, at] : {std::pair{0.0, 9 * MiB / 4}, std::pair{0.4, std::size_t{0}}}) {
    arena_options o = one_zone(8 * MiB);
    o.max_cached_ratio = 1.0;
    o.stage_room_share = share;
    cold_and_busy t(o);
    EXPECT_EQ(t.ar.allocate(3 * MiB / 4, 512), t.base + at) << share;
    t.ar.validate();
  }
}

TEST(Arena, UntilTheDeviceIsFullOrForARequestWellBelowThePeakATightArenaTakesMappedMemoryOverGrowthThatPinsLess) {
  // An 8 GiB device: handles the size their growth needs. H0 = [0, 4) MiB, a 4 MiB handle, cold once a is
  // freed; c = [4, 5.5) in H1 = [4, 6). In use 1.5 MiB, reserved 6. With max_cached_ratio 1 the cache
  // budget beside 2.5 MiB is 1 x (1.5 + 2.5) = 4 MiB: tight with less than 3 x 4 + 2.5 = 14.5 MiB left, full
  // with less than 4 + 2.5 = 6.5.
  // The mapped range [0, 4) holds the block but pins all of cold H0 (4 MiB) at either end. Growth pins less:
  // from c's free end at 5.5 MiB into one new granule at [6, 8), 2 MiB.
  //  - limit 16 MiB, 10 left: tight, not full. The block takes [0, 2.5) in H0: growth would create memory
  //    beside the cold handle. Reserved stays 6 MiB.
  //  - limit 12 MiB, 6 left: full. In use with the block is 4 MiB, the peak in use 5.5 (a and c): 4 >= 0.7 x
  //    5.5 = 3.85, so the request is guarded from pinning cold memory (cold_guard_share 0.7, the default).
  //    The block grows at [5.5, 8), and H0 stays cold for what comes next (reserved 8 MiB is within the
  //    budget of 1.5 + 2.5 + 4 MiB, so nothing is recycled).
  //  - limit 12 MiB with cold_guard_share 0.75: 4 < 0.75 x 5.5 = 4.125, well below the peak: the block takes
  //    [0, 2.5) in H0 as with room, and reserved stays 6 MiB.
  // The stages are judged with the whole budget here (stage_room_share 0): bound by the room above the peak,
  // the budget would be 0.4 x (12 / 5.5 - 1) = 0.47 of what is in use, and the arena not full.
  for (const auto& [limit, share, at, reserved] : {std::tuple{16 * MiB, 0.7, std::size_t{0}, 6 * MiB},
                                                   std::tuple{12 * MiB, 0.7, 11 * MiB / 2, 8 * MiB},
                                                   std::tuple{12 * MiB, 0.75, std::size_t{0}, 6 * MiB}}) {
    sim_device dev(small_device(std::size_t{8} << 30));
    arena_options o = one_zone();
    o.max_cached_ratio = 1.0;
    o.cold_guard_share = share;
    o.stage_room_share = 0;
    arena ar(dev, o);
    const device_ptr base = ar.zone_base(0);
    const device_ptr a = ar.allocate(4 * MiB, 512);
    const device_ptr c = ar.allocate(3 * MiB / 2, 512);
    ASSERT_EQ(c, base + 4 * MiB);
    ar.deallocate(a, 4 * MiB);
    ASSERT_EQ(ar.reserved(), 6 * MiB);
    ar.set_limit(limit);
    EXPECT_EQ(ar.allocate(5 * MiB / 2, 512), base + at) << limit << " " << share;
    ar.validate();
    EXPECT_EQ(ar.reserved(), reserved) << limit << " " << share;
    EXPECT_EQ(ar.counters().growths, at == 0 ? 2u : 3u) << limit << " " << share;
  }
}

TEST(Arena, WithRoomTheBlockTakesTheStartOfTheBestFit) {
  cold_and_busy t(one_zone());
  EXPECT_EQ(t.ar.allocate(3 * MiB / 4, 512), t.base);
  t.ar.validate();
}

TEST(Arena, RecyclingForATightGrowthKeepsTheHandleItRecycledAndReleasesAnother) {
  // An 8 GiB device: handles the size their growth needs. In MiB from the zone's base: H0 = [0, 4),
  // k1 = H1 = [4, 6), H2 = [6, 10), k2 = H3 = [10, 12); the blocks on H0 and H2 are freed, so both are cold.
  sim_device dev(small_device(std::size_t{8} << 30));
  arena ar(dev, one_zone());
  const device_ptr base = ar.zone_base(0);
  const device_ptr a = ar.allocate(4 * MiB, 512);
  ar.allocate(2 * MiB, 512);
  const device_ptr b = ar.allocate(4 * MiB, 512);
  ar.allocate(2 * MiB, 512);
  ar.deallocate(a, 4 * MiB);
  ar.deallocate(b, 4 * MiB);
  ASSERT_EQ(ar.reserved(), 12 * MiB);
  ASSERT_EQ(calls(dev, device_call::mem_create), 4u);
  // Under a 16 MiB limit 6 MiB is tight, fits no free range and no hole: it grows at the top, [12, 18). The
  // budget is 1.05 x (4 + 6) = 10.5 MiB, so growth recycles: H2 (4 MiB, the largest cold handle within the
  // 6 wanted) is unmapped; no cold handle is within the 2 MiB still wanted, and 12 + 2 > 10.5, so the
  // smallest larger cold handle, H0, goes back to the device. H2 is mapped at [12, 16) and one 2 MiB handle
  // made for [16, 18): reserved 2 + 4 + 2 + 2 = 10 MiB, all of it in use.
  ar.set_limit(16 * MiB);
  const device_ptr z = ar.allocate(6 * MiB, 512);
  ar.validate();
  EXPECT_EQ(z, base + 12 * MiB);
  EXPECT_EQ(ar.reserved(), 10 * MiB);
  EXPECT_EQ(ar.in_use(), 10 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 5u);
  EXPECT_EQ(calls(dev, device_call::mem_release), 1u);
  EXPECT_EQ(ar.counters().handles_released, 1u);
  EXPECT_EQ(handles_mapped_at(ar, {base + 12 * MiB}), 1);
}

// A cold handle in zone 1 recycled for a 2 MiB growth in zone 0, past the cache budget: an 8 GiB device, so
// handles are the size their growth needs. In MiB from zone 1's base: H0 = [0, cold), H1 = [cold, cold + 2)
// holds a 2 MiB block; H0's block is freed. In use 2 MiB, reserved cold + 2. A 2 MiB block in the empty zone 0
// grows at its base; the budget is 1.05 x (2 + 2) = 4.2 MiB, so growth recycles: H0, the smallest cold handle
// that covers the 2 MiB wanted, is unmapped and becomes a spare.
struct recycled_across_zones {
  sim_device dev;
  arena ar;
  device_ptr z = 0;
  recycled_across_zones(std::size_t cold, std::size_t slack) : dev(small_device(std::size_t{8} << 30)), ar(dev, [&] {
    arena_options o = one_zone();
    o.zones = 2;
    o.spare_slack_bytes = slack;
    return o;
  }()) {
    const device_ptr a = ar.allocate(cold, 512, 1);
    ar.allocate(2 * MiB, 512, 1);
    ar.deallocate(a, cold);
    EXPECT_EQ(ar.reserved(), cold + 2 * MiB);
    z = ar.allocate(2 * MiB, 512, 0);
    ar.validate();
  }
};

TEST(Arena, PastTheBudgetASpareThatWouldLeaveMoreThanTheSlackFreeGoesBackToTheDevice) {
  // H0 is 8 MiB: mapped for the 2 MiB block it would leave 6 MiB free in zone 0, more than the 2 MiB slack.
  // It goes back to the device and a 2 MiB handle is made: reserved 2 + 2 = 4 MiB, all of it in use.
  recycled_across_zones t(8 * MiB, 2 * MiB);
  EXPECT_EQ(t.z, t.ar.zone_base(0));
  EXPECT_EQ(t.ar.reserved(), 4 * MiB);
  EXPECT_EQ(t.ar.in_use(), 4 * MiB);
  EXPECT_EQ(calls(t.dev, device_call::mem_unmap), 1u);
  EXPECT_EQ(calls(t.dev, device_call::mem_release), 1u);
  EXPECT_EQ(calls(t.dev, device_call::mem_create), 3u);
  EXPECT_EQ(t.ar.counters().handles_released, 1u);
}

TEST(Arena, ASpareThatLeavesAtMostTheSlackFreeOrAnyWithoutASlackIsMappedWhole) {
  // H0 of 4 MiB leaves 2 MiB free, the slack itself: mapped at zone 0's base, the block at its start.
  recycled_across_zones at_slack(4 * MiB, 2 * MiB);
  EXPECT_EQ(at_slack.z, at_slack.ar.zone_base(0));
  EXPECT_EQ(at_slack.ar.reserved(), 6 * MiB);
  EXPECT_EQ(handles_mapped_at(at_slack.ar, {at_slack.ar.zone_base(0)}), 1);
  EXPECT_EQ(calls(at_slack.dev, device_call::mem_release), 0u);
  EXPECT_EQ(calls(at_slack.dev, device_call::mem_create), 2u);
  // With no slack set (the arena's default), the 8 MiB spare is mapped whole too: reserved stays 10 MiB.
  recycled_across_zones unbounded(8 * MiB, SIZE_MAX);
  EXPECT_EQ(unbounded.z, unbounded.ar.zone_base(0));
  EXPECT_EQ(unbounded.ar.reserved(), 10 * MiB);
  EXPECT_EQ(calls(unbounded.dev, device_call::mem_release), 0u);
  EXPECT_EQ(calls(unbounded.dev, device_call::mem_create), 2u);
}

// A block of more than 32 granules takes a free end of a handle elsewhere (an alias) only near the end of
// memory: when in use + the block + two cache budgets (5% of in use + the block each) reach the limit.
// Layout: a = [0, 1.5) in H0; x = [1.5, 4) over H0's end and H1 = [2, 4); c = [4, 6) in H2. x freed and
// trimmed: H1 goes back, [2, 4) is a gap with H0's free end [1.5, 2) beside it; reserved 4 MiB, in use 3.5.
// B = 66.5 MiB fits no free range. At the top it needs 34 granules (68 MiB); in a fresh range with its first
// 0.5 MiB in H0's free end it needs 33 (66 MiB). In use with B is 70 MiB, a budget 3.5 MiB: the arena is
// tight under both limits (left 72 or 76 < 66.5 + 3 budgets = 77) and not full (left >= 66.5 + 3.5).
// Under 76 MiB, 70 x 1.1 = 77 reaches the limit: the alias. Under 80 MiB it does not: the top.
TEST(Arena, ALargeBlockTakesAnAliasOnlyNearTheEndOfMemory) {
  for (const auto& [limit, aliased] : {std::pair{76 * MiB, true}, std::pair{80 * MiB, false}}) {
    sim_device dev(small_device(128 * MiB));
    arena ar(dev, one_zone(limit));
    const device_ptr base = ar.zone_base(0);
    const device_ptr a = ar.allocate(3 * MiB / 2, 512);
    const device_ptr x = ar.allocate(5 * MiB / 2, 512);
    const device_ptr c = ar.allocate(2 * MiB, 512);
    ASSERT_EQ(a, base);
    ASSERT_EQ(x, base + 3 * MiB / 2);
    ASSERT_EQ(c, base + 4 * MiB);
    ar.deallocate(x, 5 * MiB / 2);
    ar.trim();
    ASSERT_EQ(ar.reserved(), 4 * MiB);
    const device_ptr b = ar.allocate(133 * MiB / 2, 512);
    ASSERT_NE(b, 0u) << limit;
    ar.validate();
    EXPECT_EQ(ar.counters().aliases_mapped, aliased ? 1u : 0u) << limit;
    EXPECT_EQ(ar.counters().out_of_memory_recoveries, 0u) << limit;
    EXPECT_EQ(ar.reserved(), aliased ? 70 * MiB : 72 * MiB) << limit;
    if (!aliased) EXPECT_EQ(b, base + 6 * MiB);
  }
}

}  // namespace
}  // namespace vram
