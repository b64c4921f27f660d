// The flat address map: by hand, through its growth and its deletions, and against std::unordered_map over
// a random run whose few keys collide and wrap around the table's end.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>

#include "vram/core/address_map.hpp"

namespace vram::detail {
namespace {

TEST(AddressMap, InsertsFindsAssignsAndErases) {
  address_map<std::uint64_t> m;
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.find(0), nullptr);
  EXPECT_FALSE(m.erase(0));  // an empty map, before any table exists
  EXPECT_TRUE(m.insert_or_assign(0, 7));  // address 0 is a key like any other
  EXPECT_TRUE(m.insert_or_assign(0x7f0000000000, 512));
  EXPECT_FALSE(m.insert_or_assign(0, 9));  // assigned, not added
  EXPECT_EQ(m.size(), 2u);
  ASSERT_NE(m.find(0), nullptr);
  EXPECT_EQ(*m.find(0), 9u);
  EXPECT_EQ(*m.find(0x7f0000000000), 512u);
  EXPECT_EQ(m.find(512), nullptr);
  EXPECT_TRUE(m.erase(0));
  EXPECT_FALSE(m.erase(0));
  EXPECT_FALSE(m.contains(0));
  EXPECT_TRUE(m.contains(0x7f0000000000));
  EXPECT_EQ(m.size(), 1u);
}

// 1,000 blocks 512 bytes apart (the table doubles six times on the way), every other one freed: the rest
// are all found with their sizes, the freed ones are gone, and adding them back finds them again.
TEST(AddressMap, KeepsEveryKeyThroughGrowthAndHalfTheKeysErased) {
  address_map<std::uint64_t> m;
  const std::uint64_t base = 0x7f0000000000;
  for (std::uint64_t i = 0; i < 1000; ++i) EXPECT_TRUE(m.insert_or_assign(base + 512 * i, i + 1));
  EXPECT_EQ(m.size(), 1000u);
  for (std::uint64_t i = 0; i < 1000; i += 2) EXPECT_TRUE(m.erase(base + 512 * i));
  EXPECT_EQ(m.size(), 500u);
  for (std::uint64_t i = 0; i < 1000; ++i) {
    const std::uint64_t* v = m.find(base + 512 * i);
    if (i % 2 == 0) {
      EXPECT_EQ(v, nullptr) << i;
    } else {
      ASSERT_NE(v, nullptr) << i;
      EXPECT_EQ(*v, i + 1);
    }
  }
  std::uint64_t keys = 0, sum = 0;
  m.for_each([&](std::uint64_t, std::uint64_t v) {
    ++keys;
    sum += v;
  });
  EXPECT_EQ(keys, 500u);
  EXPECT_EQ(sum, 250'500u);  // 2 + 4 + ... + 1000 = 2 x (500 x 501 / 2)
  for (std::uint64_t i = 0; i < 1000; i += 2) EXPECT_TRUE(m.insert_or_assign(base + 512 * i, 0));
  EXPECT_EQ(m.size(), 1000u);
}

// 200,000 random inserts, assignments and erases over 64 keys (a table of 256 slots at most, so runs
// collide, wrap around the end and are shifted back on every erase), checked against std::unordered_map
// after every step.
TEST(AddressMap, AgreesWithUnorderedMapOverARandomRun) {
  std::mt19937_64 rng(20261205);
  address_map<int> m;
  std::unordered_map<std::uint64_t, int> ref;
  for (int step = 0; step < 200'000; ++step) {
    const std::uint64_t key = (rng() % 64) * 512;
    const int value = static_cast<int>(rng() % 1000);
    if (rng() % 3 == 0) {
      ASSERT_EQ(m.erase(key), ref.erase(key) == 1) << step;
    } else {
      const bool added = ref.find(key) == ref.end();
      ref[key] = value;
      ASSERT_EQ(m.insert_or_assign(key, value), added) << step;
    }
    ASSERT_EQ(m.size(), ref.size()) << step;
    // Every key of the reference is found with its value, and a key it lacks is not.
    for (const auto& [k, v] : ref) {
      const int* got = m.find(k);
      ASSERT_NE(got, nullptr) << step;
      ASSERT_EQ(*got, v) << step;
    }
    const std::uint64_t probe = (rng() % 64) * 512;
    ASSERT_EQ(m.contains(probe), ref.count(probe) == 1) << step;
  }
}

}  // namespace
}  // namespace vram::detail
