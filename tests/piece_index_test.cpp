// The arena's index of pieces: both orders kept in step, by hand and against a plain map over a random run.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/pool/piece_index.hpp"

namespace vram::detail {
namespace {

using side = piece_index::side;

TEST(PieceIndex, SetChangesAndRemovesAPieceInBothOrders) {
  piece_index x;
  EXPECT_TRUE(x.empty());
  x.set(side::suffix, 0x4000, 512);
  x.set(side::suffix, 0x8000, 1024);
  x.set(side::suffix, 0x2000, 1024);
  x.set(side::prefix, 0x4000, 2048);  // the other side of the same boundary is another piece
  x.validate();
  EXPECT_EQ(x.size(side::suffix), 3u);
  EXPECT_EQ(x.size(side::prefix), 1u);
  // Shortest first, ties by address.
  EXPECT_EQ(x.lengths(side::suffix),
            (piece_index::by_length{{512, 0x4000}, {1024, 0x2000}, {1024, 0x8000}}));
  x.set(side::suffix, 0x4000, 4096);  // it grew
  EXPECT_EQ(x.lengths(side::suffix),
            (piece_index::by_length{{1024, 0x2000}, {1024, 0x8000}, {4096, 0x4000}}));
  EXPECT_EQ(x.length_at(side::suffix, 0x4000), 4096u);
  EXPECT_EQ(x.length_at(side::prefix, 0x4000), 2048u);
  x.set(side::suffix, 0x2000, 0);  // gone
  x.set(side::suffix, 0x6000, 0);  // was never there: nothing
  EXPECT_EQ(x.places(side::suffix), (piece_index::by_place{{0x4000, 4096}, {0x8000, 1024}}));
  EXPECT_EQ(x.length_at(side::suffix, 0x2000), 0u);
  x.validate();
  x.clear();
  EXPECT_TRUE(x.empty());
  EXPECT_TRUE(x.lengths(side::prefix).empty());
}

TEST(PieceIndex, AgreesWithAPlainMapOverARandomRun) {
  std::mt19937_64 rng(20261204);
  piece_index x;
  std::map<device_ptr, std::size_t> ref[2];
  for (int step = 0; step < 20000; ++step) {
    const side s = rng() % 2 ? side::suffix : side::prefix;
    const device_ptr at = (rng() % 64) * 0x200000;
    const std::size_t len = rng() % 3 == 0 ? 0 : (rng() % 8) * 512;  // a third remove, some set the same
    x.set(s, at, len);
    auto& r = ref[s == side::suffix ? 0 : 1];
    if (len == 0) r.erase(at);
    else r[at] = len;
    if (step % 997 == 0) x.validate();
  }
  x.validate();
  for (const side s : {side::suffix, side::prefix}) {
    const auto& r = ref[s == side::suffix ? 0 : 1];
    EXPECT_EQ(x.places(s), r);
    piece_index::by_length want;
    for (const auto& [at, len] : r) want.insert({len, at});
    EXPECT_EQ(x.lengths(s), want);
    for (device_ptr at = 0; at < 64 * 0x200000; at += 0x200000)
      EXPECT_EQ(x.length_at(s, at), r.count(at) ? r.at(at) : 0u);
  }
}

}  // namespace
}  // namespace vram::detail
