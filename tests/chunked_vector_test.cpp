// chunked_vector: chunks of 4 here (Bits = 2), so that every step crosses chunk boundaries.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "vram/core/chunked_vector.hpp"

namespace vram::detail {
namespace {

TEST(ChunkedVector, GrowsByChunksWithoutMovingWhatItHolds) {
  chunked_vector<int, 2> v;
  EXPECT_TRUE(v.empty());
  for (int i = 0; i < 5; ++i) v.push_back(10 * i);  // two chunks: 0..3 and 4
  const int* first = &v[0];
  const int* fifth = &v[4];
  for (int i = 5; i < 9; ++i) v.push_back(10 * i);  // a third chunk
  EXPECT_EQ(v.size(), 9u);
  EXPECT_EQ(&v[0], first);  // nothing moved
  EXPECT_EQ(&v[4], fifth);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(v[i], 10 * i);
  EXPECT_EQ(v.back(), 80);
  v.shrink_to(3);  // drops 30..80
  EXPECT_EQ(v.size(), 3u);
  EXPECT_EQ(v.back(), 20);
  v.push_back(7);  // index 3, in the first chunk; then 4, in the second chunk, kept and reset
  v.push_back(8);
  EXPECT_EQ(v[3], 7);
  EXPECT_EQ(v[4], 8);
  EXPECT_EQ(&v[4], fifth);
  v.clear();
  EXPECT_TRUE(v.empty());
}

TEST(ChunkedVector, AgreesWithStdVectorOverARandomRun) {
  std::mt19937_64 rng(20261205);
  chunked_vector<std::uint64_t, 2> v;
  std::vector<std::uint64_t> ref;
  for (int step = 0; step < 20'000; ++step) {
    const auto r = rng() % 10;
    if (r < 6) {
      const std::uint64_t x = rng();
      v.push_back(x);
      ref.push_back(x);
    } else if (r < 8 && !ref.empty()) {
      const std::size_t i = rng() % ref.size();
      v[i] = ref[i] = rng();
    } else if (!ref.empty()) {
      const std::size_t n = rng() % (ref.size() + 1);
      v.shrink_to(n);
      ref.resize(n);
    }
    ASSERT_EQ(v.size(), ref.size()) << step;
    for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(v[i], ref[i]) << step;
  }
}

}  // namespace
}  // namespace vram::detail
