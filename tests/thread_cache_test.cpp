// A thread's cache: its rules by hand (stream order, a bin's last entry first, the byte limit, eight large
// slots), then a randomised run against a reference written from the header's words with plain vectors.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "vram/core/size.hpp"
#include "vram/pool/thread_cache.hpp"

namespace vram::detail {
namespace {

TEST(ThreadCache, HandsABlockOutOnlyOnItsStreamAndSizeLastInFirstOut) {
  thread_cache c(4 * MiB);
  block_table::slot* slot = nullptr;
  EXPECT_TRUE(c.push(0x1000, 1024, 1, nullptr));
  EXPECT_TRUE(c.push(0x2000, 1024, 2, nullptr));
  EXPECT_EQ(c.pop(1024, 1, slot), 0u);  // the bin's last entry is stream 2's: stream 1 waits behind it
  EXPECT_EQ(c.pop(512, 2, slot), 0u);   // another size
  EXPECT_EQ(c.pop(1024, 2, slot), 0x2000u);
  EXPECT_EQ(c.pop(1024, 1, slot), 0x1000u);
  EXPECT_EQ(c.cached_bytes(), 0u);
  // Large blocks: eight slots, matched by exact size and stream, in any order.
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(c.push(0x100000 * (i + 1), (i + 1) * MiB, 0, nullptr));
  EXPECT_FALSE(c.push(0x900000, 9 * MiB, 0, nullptr));
  EXPECT_EQ(c.pop(5 * MiB, 0, slot), 0x500000u);
  EXPECT_EQ(c.cached_bytes(), 31 * MiB);  // 1 + ... + 8 MiB, less 5
}

TEST(ThreadCache, TheByteLimitHoldsForSmallBlocksAndABinHoldsEight) {
  thread_cache c(4 * KiB);
  block_table::slot* slot = nullptr;
  EXPECT_TRUE(c.push(0x1000, 2 * KiB, 0, nullptr));
  EXPECT_TRUE(c.push(0x2000, 2 * KiB, 0, nullptr));
  EXPECT_FALSE(c.push(0x3000, 512, 0, nullptr));  // 4 KiB held: the limit
  EXPECT_NE(c.pop(2 * KiB, 0, slot), 0u);
  thread_cache d(4 * MiB);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(d.push(0x1000 * (i + 1), 512, 0, nullptr));
  EXPECT_FALSE(d.push(0x9000, 512, 0, nullptr));
  std::vector<cache_entry> out;
  d.drain(out);
  EXPECT_EQ(out.size(), 8u);
  EXPECT_EQ(d.cached_bytes(), 0u);
}

/// The header's rules, plainly: a stack per small size, a list of up to eight large blocks.
class reference_cache {
 public:
  explicit reference_cache(std::size_t limit) : limit_(limit) {}
  bool push(device_ptr p, std::size_t size, stream_id s) {
    if (size <= thread_cache::bins * 512) {
      auto& bin = small_[size];
      if (bin.size() == thread_cache::per_bin || small_bytes_ + size > limit_) return false;
      bin.push_back({p, size, s, nullptr});
      small_bytes_ += size;
      return true;
    }
    if (large_.size() == thread_cache::large_slots) return false;
    large_.push_back({p, size, s, nullptr});
    return true;
  }
  device_ptr pop(std::size_t size, stream_id s) {
    if (size <= thread_cache::bins * 512) {
      auto& bin = small_[size];
      if (bin.empty() || bin.back().stream != s) return 0;
      const device_ptr p = bin.back().ptr;
      bin.pop_back();
      small_bytes_ -= size;
      return p;
    }
    for (std::size_t i = 0; i < large_.size(); ++i) {
      if (large_[i].size == size && large_[i].stream == s) {
        const device_ptr p = large_[i].ptr;
        large_[i] = large_.back();  // the last takes its place, as in the cache
        large_.pop_back();
        return p;
      }
    }
    return 0;
  }
  std::size_t bytes() const { return small_bytes_ + large_bytes(); }
  std::size_t large_bytes() const {
    std::size_t n = 0;
    for (const auto& e : large_) n += e.size;
    return n;
  }
  /// The large blocks, in the order they sit in the list; the small ones stay.
  std::vector<device_ptr> drain_large() {
    std::vector<device_ptr> out;
    for (const auto& e : large_) out.push_back(e.ptr);
    large_.clear();
    return out;
  }

 private:
  std::size_t limit_;
  std::size_t small_bytes_ = 0;
  std::map<std::size_t, std::vector<cache_entry>> small_;
  std::vector<cache_entry> large_;
};

TEST(ThreadCache, AgreesWithAReferenceOverARandomRun) {
  for (const std::uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto pick = [&rng](std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(rng); };
    thread_cache c(64 * KiB);
    reference_cache ref(64 * KiB);
    device_ptr next = 0x10000;
    // A few sizes, small and large, and two streams, so that bins fill and streams block each other.
    const std::size_t sizes[] = {512, 1024, 4 * KiB, 32 * KiB, 256 * KiB, 256 * KiB + 512, 1 * MiB, 3 * MiB};
    for (int step = 0; step < 20000; ++step) {
      const std::size_t size = sizes[pick(0, std::size(sizes) - 1)];
      const stream_id s = pick(0, 1);
      block_table::slot* slot = nullptr;
      if (pick(0, 1) == 0) {
        ASSERT_EQ(c.push(next, size, s, nullptr), ref.push(next, size, s)) << "push of " << size;
        next += 4 * MiB;
      } else {
        ASSERT_EQ(c.pop(size, s, slot), ref.pop(size, s)) << "pop of " << size << " on stream " << s;
      }
      ASSERT_EQ(c.cached_bytes(), ref.bytes());
      ASSERT_EQ(c.large_bytes(), ref.large_bytes());
      if (step % 1000 == 499) {  // a large request that missed: the large blocks go, the small ones stay
        std::vector<cache_entry> out;
        c.drain_large(out);
        std::vector<device_ptr> got;
        for (const auto& e : out) got.push_back(e.ptr);
        ASSERT_EQ(got, ref.drain_large());
        ASSERT_EQ(c.cached_bytes(), ref.bytes());
        ASSERT_EQ(c.large_bytes(), 0u);
      }
      if (step % 5000 == 4999) {  // a flush empties both
        std::vector<cache_entry> out;
        c.drain(out);
        ref = reference_cache(64 * KiB);
        ASSERT_EQ(c.cached_bytes(), 0u);
      }
    }
  }
}

}  // namespace
}  // namespace vram::detail
