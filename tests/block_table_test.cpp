// The pool's block table: a few cases by hand, then a randomised run against a reference map of
// address -> (state, size), through growth (which leaves the tombstones of gone blocks behind: a gone block
// reads as never handed out afterwards) and tombstones.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "vram/core/size.hpp"
#include "vram/pool/block_table.hpp"

namespace vram::detail {
namespace {

TEST(BlockTable, FreeMovesALiveBlockToCachedOnlyWithItsSize) {
  block_table t;
  t.insert_live(0x1000, 1024);
  block_state found{};
  std::size_t held = 0;
  EXPECT_FALSE(t.free_live(0x1000, 512, found, held));  // the wrong size: nothing changes
  EXPECT_EQ(found, block_state::live);
  EXPECT_EQ(held, 1024u);
  EXPECT_TRUE(t.free_live(0x1000, 1024, found, held));
  EXPECT_EQ(t.lookup(0x1000), block_state::cached);
  EXPECT_FALSE(t.free_live(0x1000, 1024, found, held));  // a double free
  EXPECT_EQ(found, block_state::cached);
  EXPECT_FALSE(t.free_live(0x2000, 1024, found, held));  // never handed out
  EXPECT_EQ(found, block_state::empty);
  EXPECT_EQ(t.transition(0x1000, block_state::cached, block_state::gone), 1024u);
  EXPECT_EQ(t.lookup(0x1000), block_state::gone);
  t.insert_live(0x1000, 4096);  // the tombstone's slot serves the address again
  std::size_t size = 0;
  EXPECT_EQ(t.lookup(0x1000, &size), block_state::live);
  EXPECT_EQ(size, 4096u);
}

TEST(BlockTable, AgreesWithAReferenceThroughGrowthAndTombstones) {
  struct entry {
    block_state state;
    std::size_t size;
  };
  for (const std::uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto pick = [&rng](std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(rng); };
    block_table t;
    std::map<device_ptr, entry> ref;  // what the table must hold, gone included
    std::size_t grown = 0;
    for (int step = 0; step < 20000; ++step) {
      const device_ptr p = 0x7f0000000000 + pick(0, 3000) * 512;  // few enough addresses to meet again
      const auto it = ref.find(p);
      const block_state now = it == ref.end() ? block_state::empty : it->second.state;
      switch (pick(0, 3)) {
        case 0:  // the lock holder hands out a block at p, if p is free
          if (now == block_state::live || now == block_state::cached) break;
          if (t.full()) {
            t.grow();  // copies live and cached blocks; tombstones stay behind
            std::erase_if(ref, [](const auto& kv) { return kv.second.state == block_state::gone; });
            ++grown;
          }
          ref[p] = {block_state::live, 512 * pick(1, 64)};
          t.insert_live(p, ref[p].size);
          break;
        case 1: {  // the program frees p, with its size or a wrong one
          const std::size_t size = now == block_state::live && pick(0, 3) != 0 ? ref[p].size : 512 * pick(1, 64);
          block_state found{};
          std::size_t held = 0;
          const bool ok = t.free_live(p, size, found, held);
          const bool want = now == block_state::live && ref[p].size == size;
          ASSERT_EQ(ok, want);
          if (ok) {
            ref[p].state = block_state::cached;
          } else {
            ASSERT_EQ(found, now);
            if (now != block_state::empty) ASSERT_EQ(held, ref[p].size);
          }
          break;
        }
        case 2:  // the cache hands p out again, or gives it back to the arena
          if (now != block_state::cached) {
            ASSERT_EQ(t.transition(p, block_state::cached, block_state::gone), 0u);
            break;
          } else {
            const block_state to = pick(0, 1) ? block_state::live : block_state::gone;
            ASSERT_EQ(t.transition(p, block_state::cached, to), ref[p].size);
            ref[p].state = to;
          }
          break;
        default: {  // a look
          std::size_t size = 0;
          ASSERT_EQ(t.lookup(p, &size), now);
          if (now != block_state::empty) ASSERT_EQ(size, ref[p].size);
        }
      }
    }
    std::map<device_ptr, entry> listed;
    t.for_each([&](device_ptr p, block_state s, std::size_t size) { listed[p] = {s, size}; });
    std::size_t held = 0;
    for (const auto& [p, e] : ref) {
      if (e.state == block_state::gone) continue;
      ++held;
      ASSERT_TRUE(listed.count(p));
      ASSERT_EQ(listed[p].state, e.state);
      ASSERT_EQ(listed[p].size, e.size);
    }
    EXPECT_EQ(listed.size(), held);
    EXPECT_GT(grown, 0u);  // the run went through growth
  }
}

}  // namespace
}  // namespace vram::detail
