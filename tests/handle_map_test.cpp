// The arena's books without a device: handles, views, busy and cold, spares, aliases given back, and the
// pieces beside gaps, worked out by hand on a zone of 2 MiB granules. validate() runs after every step.
#include <gtest/gtest.h>

#include <map>
#include <random>
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

TEST(HandleMap, SparesOfOneSizeKeepTheOrderTheyCameInAndAnyOfThemLeaves) {
  handle_map m = one_zone();
  std::vector<std::uint32_t> h;
  for (phys_handle id : {21, 22, 23, 24}) h.push_back(m.add_handle(id, 2 * MiB));
  const auto big = m.add_handle(25, 4 * MiB);
  for (auto idx : {h[2], h[0], big, h[3], h[1]}) m.add_spare(idx);
  m.validate(0);
  EXPECT_EQ(m.spare_bytes(), 12 * MiB);
  // By size, then in the order made spare: 23, 21, 24, 22, then the 4 MiB one.
  std::vector<phys_handle> order;
  for (const auto& [key, idx] : m.spares()) order.push_back(m.handle(idx).h);
  EXPECT_EQ(order, (std::vector<phys_handle>{23, 21, 24, 22, 25}));
  // The newest of a size is the last before the next size: what a growth that wants more takes.
  auto last = m.spares().upper_bound({2 * MiB, handle_map::spare_last});
  EXPECT_EQ(m.handle((--last)->second).h, phys_handle{22});
  m.take_spare(h[3]);  // one from the middle of its size
  m.take_spare(big);
  order.clear();
  for (const auto& [key, idx] : m.spares()) order.push_back(m.handle(idx).h);
  EXPECT_EQ(order, (std::vector<phys_handle>{23, 21, 22}));
  EXPECT_EQ(m.spare_bytes(), 6 * MiB);
  EXPECT_EQ(m.remove_handle(big), phys_handle{25});
  m.add_spare(h[3]);  // back in, now the newest
  order.clear();
  for (const auto& [key, idx] : m.spares()) order.push_back(m.handle(idx).h);
  EXPECT_EQ(order, (std::vector<phys_handle>{23, 21, 22, 24}));
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

// The layout of the two piece tests: three handles of a granule. H0 at [0, 2) MiB: a block in [0, 0.5), free
// [0.5, 2). Gap [2, 6). H1 at [6, 8) and H2 right after at [8, 10), a block in [9, 10); what lies in [6, 9) is
// each test's own. Gap [10, 32). Returns H1.
std::uint32_t three_handles(handle_map& m) {
  const auto h0 = m.add_handle(1, 2 * MiB), h1 = m.add_handle(2, 2 * MiB), h2 = m.add_handle(3, 2 * MiB);
  m.add_view(h0, base);
  m.add_view(h1, base + 6 * MiB);
  m.add_view(h2, base + 8 * MiB);
  m.free_insert(base + MiB / 2, 3 * MiB / 2);
  m.touch(base, MiB / 2);
  m.touch(base + 9 * MiB, MiB);
  return h1;
}

TEST(HandleMap, PiecesAreTheFreeEndsBesideGaps) {
  handle_map m = one_zone();
  // three_handles, with H1 free in [6, 7) and a block in [7, 8), and H2 free in [8, 9).
  three_handles(m);
  m.free_insert(base + 6 * MiB, MiB);
  m.touch(base + 7 * MiB, MiB);
  m.free_insert(base + 8 * MiB, MiB);
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

// A view whose unmap waits for its fence is gone from the books but still mapped on the device: no gap yet, so
// no piece lies beside it, and the pieces at its own ends go with it. Once the device unmaps it, the gap it
// joins has the pieces of the views beside it.
TEST(HandleMap, AViewWhoseUnmapWaitsIsNoGapAndLeavesNoPiece) {
  handle_map m = one_zone();
  // three_handles, with H1 cold, all free, and H2 free in [8, 9): one free range [6, 9).
  const auto h1 = three_handles(m);
  m.free_insert(base + 6 * MiB, 3 * MiB);
  m.keep_pieces(true);
  m.validate(0);
  // H1's free start after the gap is a prefix of 2 MiB (a piece ends at its view's end).
  EXPECT_EQ(m.pieces().places(side::suffix), (piece_index::by_place{{base + 2 * MiB, 3 * MiB / 2}}));
  EXPECT_EQ(m.pieces().places(side::prefix), (piece_index::by_place{{base + 6 * MiB, 2 * MiB}}));

  // H1 unmapped in the books, its fence pending: [6, 8) is no gap, so H2's free start at 8 MiB is no prefix,
  // and H1's prefix at 6 MiB is gone with its view.
  std::vector<mapping> pending;
  m.unmap_handle(h1, [&](mapping g) { pending.push_back(g); });
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].va, base + 6 * MiB);
  EXPECT_EQ(m.pieces().places(side::suffix), (piece_index::by_place{{base + 2 * MiB, 3 * MiB / 2}}));
  EXPECT_TRUE(m.pieces().places(side::prefix).empty());
  m.validate(2 * MiB);

  // A block freed into H2's free start while the unmap waits changes no piece either.
  m.free_erase(base + 8 * MiB, MiB / 2);
  m.touch(base + 8 * MiB, MiB / 2);
  m.untouch(base + 8 * MiB, MiB / 2);
  m.free_insert(base + 8 * MiB, MiB / 2);
  EXPECT_TRUE(m.pieces().places(side::prefix).empty());
  m.validate(2 * MiB);

  // The device unmaps it: the gap [2, 8) ends at H2, whose free start of 1 MiB is now a prefix.
  m.address_unmapped(pending[0]);
  EXPECT_EQ(m.pieces().places(side::suffix), (piece_index::by_place{{base + 2 * MiB, 3 * MiB / 2}}));
  EXPECT_EQ(m.pieces().places(side::prefix), (piece_index::by_place{{base + 8 * MiB, MiB}}));
  m.validate(0);
}

// A random run of everything the arena does with the books but aliasing: handles made, spared, mapped where
// the address space has room, blocks of a granule placed and freed, cold handles unmapped and released. After
// every step the books validate and their totals agree with a plain list of the handles.
TEST(HandleMap, AgreesWithAPlainListOverARandomRun) {
  struct model {
    std::size_t bytes;
    bool mapped = false;
    std::vector<device_ptr> blocks;  // granules with a live block
  };
  handle_map m(base, 64 * MiB, 1, 2 * MiB);
  std::map<std::uint32_t, model> handles;
  std::mt19937_64 rng(20261204);
  std::size_t placed = 0, unmapped = 0;
  for (int step = 0; step < 20000; ++step) {
    std::vector<std::uint32_t> ids;
    for (const auto& [id, h] : handles) ids.push_back(id);
    const std::uint32_t pick = ids.empty() ? 0 : ids[rng() % ids.size()];
    switch (rng() % 6) {
      case 0: {  // a new spare
        const std::size_t bytes = (rng() % 2 + 1) * 2 * MiB;
        const auto id = m.add_handle(phys_handle{1} + step, bytes);
        m.add_spare(id);
        handles[id] = model{bytes};
        break;
      }
      case 1: {  // a spare mapped where the address space has room, all free
        if (ids.empty() || handles[pick].mapped) break;
        const auto at = m.zone_at(0).unmapped.find_best_fit(handles[pick].bytes, 2 * MiB);
        if (!at) break;
        m.take_spare(pick);
        m.add_view(pick, *at);
        m.free_insert(*at, handles[pick].bytes);
        handles[pick].mapped = true;
        break;
      }
      case 2:
      case 3: {  // a block of one granule in a free granule of a mapped handle
        if (ids.empty() || !handles[pick].mapped) break;
        const device_ptr va = m.view(m.handle(pick).views.front()).va;
        const device_ptr g = va + (rng() % (handles[pick].bytes / (2 * MiB))) * 2 * MiB;
        const auto f = m.zone_at(0).free.containing(g);
        if (!f || f->first + f->second < g + 2 * MiB) break;
        m.free_erase(g, 2 * MiB);
        m.touch(g, 2 * MiB);
        handles[pick].blocks.push_back(g);
        ++placed;
        break;
      }
      case 4: {  // a block freed, or a cold handle unmapped
        if (ids.empty() || !handles[pick].mapped) break;
        auto& h = handles[pick];
        if (!h.blocks.empty()) {
          const device_ptr g = h.blocks.back();
          h.blocks.pop_back();
          m.untouch(g, 2 * MiB);
          m.free_insert(g, 2 * MiB);
        } else {
          m.drop_stale_cold();
          m.unmap_handle(pick, [&](handle_map::mapping gone) { m.address_unmapped(gone); });
          h.mapped = false;
          ++unmapped;
        }
        break;
      }
      case 5: {  // a spare released
        if (ids.empty() || handles[pick].mapped) break;
        m.take_spare(pick);
        EXPECT_NE(m.remove_handle(pick), phys_handle{0});
        handles.erase(pick);
        break;
      }
    }
    m.validate(0);
    std::size_t reserved = 0, mapped = 0, spare = 0, cold = 0, live = 0;
    for (const auto& [id, h] : handles) {
      reserved += h.bytes;
      (h.mapped ? mapped : spare) += h.bytes;
      if (h.mapped && h.blocks.empty()) cold += h.bytes;
      live += h.blocks.size() * 2 * MiB;
      ASSERT_EQ(m.handle(id).busy, h.blocks.size());
    }
    ASSERT_EQ(m.reserved(), reserved);
    ASSERT_EQ(m.mapped(), mapped);
    ASSERT_EQ(m.spare_bytes(), spare);
    ASSERT_EQ(m.cold_bytes(), cold);
    ASSERT_EQ(m.free_memory().total, mapped - live);
    ASSERT_EQ(m.zone_at(0).unmapped.total(), 64 * MiB - mapped);
  }
  // The run did each thing many times.
  EXPECT_GT(placed, 250u) << placed;
  EXPECT_GT(unmapped, 100u) << unmapped;
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
