// The arena's books without a device: handles, views, busy and cold, spares, aliases given back, and the
// pieces beside gaps, worked out by hand on a zone of 2 MiB granules. validate() runs after every step.
#include <gtest/gtest.h>

#include <vector>

#include "vram/core/error.hpp"
#include "vram/pool/handle_map.hpp"

namespace vram::detail {
namespace {

constexpr device_ptr base = device_ptr{1} << 32;
using side = piece_index::side;
using mapping = handle_map::mapping;

handle_map one_zone() { return handle_map(base, 32 * MiB, 1, 2 * MiB); }

TEST(HandleMap, AHandleIsColdUntilABlockTouchesItAndSpareOnceUnmapped) {
  handle_map m = one_zone();
  const auto h = m.add_handle(11, 4 * MiB);
  EXPECT_EQ(m.reserved(), 4 * MiB);
  EXPECT_EQ(m.mapped(), 0u);
  const auto v = m.add_view(h, base);
  m.free_insert(base, 4 * MiB);
  m.validate(0);
  EXPECT_EQ(m.mapped(), 4 * MiB);
  EXPECT_EQ(m.cold_bytes(), 4 * MiB);
  EXPECT_EQ(m.zone_at(0).unmapped.total(), 28 * MiB);
  EXPECT_EQ(m.view_at(base + 3 * MiB).handle, h);
  EXPECT_EQ(m.handle_bytes_at(base + 3 * MiB), 4 * MiB);
  // A block at [3, 5) MiB would pin the whole 4 MiB handle; its last MiB is unmapped and pins nothing.
  EXPECT_EQ(m.pinned_by(base + 3 * MiB, 2 * MiB), 4 * MiB);

  m.free_erase(base, MiB);
  m.touch(base, MiB);  // a block at [0, 1) MiB: one granule live
  m.validate(0);
  EXPECT_EQ(m.handle(h).busy, 1u);
  EXPECT_EQ(m.cold_bytes(), 0u);
  EXPECT_EQ(m.pinned_by(base + 3 * MiB, MiB), 0u);
  EXPECT_TRUE(m.holds_live(v));
  EXPECT_EQ(m.cold().size(), 1u);  // still listed until the set is walked
  m.drop_stale_cold();
  EXPECT_TRUE(m.cold().empty());
  m.validate(0);

  m.untouch(base, MiB);
  m.free_insert(base, MiB);
  EXPECT_EQ(m.cold_bytes(), 4 * MiB);
  EXPECT_EQ(m.cold().size(), 1u);
  EXPECT_FALSE(m.holds_live(v));

  std::vector<mapping> gone;
  m.unmap_handle(h, [&](mapping g) { gone.push_back(g); });
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].va, base);
  EXPECT_EQ(gone[0].bytes, 4 * MiB);
  EXPECT_EQ(m.mapped(), 0u);
  EXPECT_EQ(m.spare_bytes(), 4 * MiB);
  EXPECT_EQ(m.free_memory().total, 0u);
  m.validate(4 * MiB);  // the device has not unmapped it yet
  EXPECT_THROW(m.validate(0), invariant_error);
  m.address_unmapped(gone[0]);
  m.validate(0);
  EXPECT_EQ(m.zone_at(0).unmapped.total(), 32 * MiB);

  m.take_spare(h);
  EXPECT_EQ(m.remove_handle(h), phys_handle{11});
  EXPECT_EQ(m.reserved(), 0u);
  m.validate(0);
}

TEST(HandleMap, AnAliasThatHoldsNoBlockGivesItsBytesBack) {
  handle_map m = one_zone();
  const auto h = m.add_handle(7, 2 * MiB);
  const auto a = m.add_view(h, base);
  m.free_insert(base + MiB, MiB);
  m.touch(base, MiB);  // a block in the first half
  // The free second half moves to a second view at 10 MiB, where a block takes it: foreign at the first view,
  // and the first half foreign at the second.
  m.free_erase(base + MiB, MiB);
  m.foreign_insert(base + MiB, MiB);
  const auto b = m.add_view(h, base + 10 * MiB);
  m.foreign_insert(base + 10 * MiB, MiB);
  m.touch(base + 11 * MiB, MiB);
  m.validate(0);
  EXPECT_EQ(m.mapped(), 2 * MiB);  // one handle, counted once
  EXPECT_EQ(m.handle(h).views.size(), 2u);
  EXPECT_EQ(m.idle_views(), std::vector<std::uint32_t>{a});  // listed when aliased
  EXPECT_EQ(m.pinned_by(base + 10 * MiB, 2 * MiB), 0u);      // busy

  // The second block goes: its view holds none now, the first still does.
  m.untouch(base + 11 * MiB, MiB);
  m.free_insert(base + 11 * MiB, MiB);
  m.validate(0);
  std::vector<mapping> gone;
  EXPECT_EQ(m.dissolve_idle_views([&](mapping g) { gone.push_back(g); }), 1u);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].va, base + 10 * MiB);
  m.address_unmapped(gone[0]);
  m.validate(0);
  EXPECT_EQ(m.handle(h).views, std::vector<std::uint32_t>{a});
  EXPECT_TRUE(m.idle_views().empty());
  // The second half is free at the first view again.
  EXPECT_EQ(m.zone_at(0).free.ranges(), (std::map<device_ptr, std::size_t>{{base + MiB, MiB}}));
  EXPECT_EQ(m.zone_at(0).foreign.total(), 0u);
  (void)b;
}

TEST(HandleMap, PiecesAreTheFreeEndsBesideGaps) {
  handle_map m = one_zone();
  // H0 at [0, 2) MiB: a block in [0, 0.5), free [0.5, 2). Gap [2, 6). H1 at [6, 8): free [6, 7), a block in
  // [7, 8). H2 right after at [8, 10): free [8, 9), a block in [9, 10). Gap [10, 32).
  const auto h0 = m.add_handle(1, 2 * MiB), h1 = m.add_handle(2, 2 * MiB), h2 = m.add_handle(3, 2 * MiB);
  m.add_view(h0, base);
  m.add_view(h1, base + 6 * MiB);
  m.add_view(h2, base + 8 * MiB);
  m.free_insert(base + MiB / 2, 3 * MiB / 2);
  m.touch(base, MiB / 2);
  m.free_insert(base + 6 * MiB, MiB);
  m.touch(base + 7 * MiB, MiB);
  m.free_insert(base + 8 * MiB, MiB);
  m.touch(base + 9 * MiB, MiB);
  EXPECT_FALSE(m.pieces_kept());
  EXPECT_TRUE(m.pieces().empty());
  m.keep_pieces(true);
  m.validate(0);
  EXPECT_EQ(m.pieces().places(side::suffix), (piece_index::by_place{{base + 2 * MiB, 3 * MiB / 2}}));
  EXPECT_EQ(m.pieces().places(side::prefix), (piece_index::by_place{{base + 6 * MiB, MiB}}));
  // Every free end, beside a gap or not: H2's free start at 8 MiB lies against H1, not a gap.
  const piece_index every = m.every_piece();
  EXPECT_EQ(every.places(side::suffix), (piece_index::by_place{{base + 2 * MiB, 3 * MiB / 2}}));
  EXPECT_EQ(every.places(side::prefix), (piece_index::by_place{{base + 6 * MiB, MiB}, {base + 8 * MiB, MiB}}));

  // A block in [0.5, 1.5) shortens the suffix to [1.5, 2); one in [1.5, 2) ends it.
  m.free_erase(base + MiB / 2, MiB);
  m.touch(base + MiB / 2, MiB);
  EXPECT_EQ(m.pieces().length_at(side::suffix, base + 2 * MiB), MiB / 2);
  m.free_erase(base + 3 * MiB / 2, MiB / 2);
  m.touch(base + 3 * MiB / 2, MiB / 2);
  EXPECT_EQ(m.pieces().length_at(side::suffix, base + 2 * MiB), 0u);
  m.validate(0);
  m.keep_pieces(false);
  EXPECT_TRUE(m.pieces().empty());
  m.validate(0);
}

TEST(HandleMap, BooksThatDisagreeAreCaught) {
  handle_map m = one_zone();
  const auto h = m.add_handle(1, 2 * MiB);
  m.add_view(h, base);
  // Nothing owns the handle's bytes at its view: neither free nor in a block is fine for the books (the
  // arena checks its blocks), but free memory over foreign memory is not.
  m.free_insert(base, 2 * MiB);
  m.validate(0);
  m.foreign_insert(base, MiB);
  EXPECT_THROW(m.validate(0), invariant_error);
}

}  // namespace
}  // namespace vram::detail
