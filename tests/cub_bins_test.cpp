// cub-bins: bin rounding, reuse from the cache (oldest first, same bin only), max_cached_bytes, requests above
// the largest bin, the free-all-and-retry on a refusal, cross-stream reuse gated by the ready event, bad frees,
// settings, and a seeded run under validate(). Expected figures are worked out by hand in the comments.
// Note: on the simulated device legacy_free completes all queued work (cudaFree waits for the device), so the
// stream tests keep device frees out of the stretch where a stream is held.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/emulation/cub_bins_resource.hpp"

namespace vram {
namespace {

sim_device_options small_device(std::size_t capacity) {
  sim_device_options o;
  o.capacity = capacity;
  o.costs = cost_model::zero();
  o.label = "test device";
  return o;
}

std::uint64_t calls(const device& d, device_call c) { return d.calls().calls(c); }

TEST(cub_bins, default_settings_are_cubs) {
  sim_device dev(small_device(64 * MiB));
  cub_bins_resource cub(dev);
  EXPECT_EQ(cub.options().bin_growth, 8u);
  EXPECT_EQ(cub.options().min_bin, 3u);
  EXPECT_EQ(cub.options().max_bin, 7u);
  EXPECT_EQ(cub.options().max_cached_bytes, 6'291'455u);  // 8^7 * 3 - 1
  EXPECT_EQ(cub.name(), "cub-bins");
}

TEST(cub_bins, requests_round_up_to_powers_of_eight_from_512_bytes) {
  sim_device dev(small_device(64 * MiB));
  cub_bins_resource cub(dev);
  // Bins 8^3 .. 8^7: 512 B, 4 KiB, 32 KiB, 256 KiB, 2 MiB; above 2 MiB the request itself.
  EXPECT_EQ(cub.block_size(1), 512u);
  EXPECT_EQ(cub.block_size(512), 512u);
  EXPECT_EQ(cub.block_size(513), 4 * KiB);
  EXPECT_EQ(cub.block_size(4 * KiB), 4 * KiB);
  EXPECT_EQ(cub.block_size(4 * KiB + 1), 32 * KiB);
  EXPECT_EQ(cub.block_size(32 * KiB + 1), 256 * KiB);
  EXPECT_EQ(cub.block_size(256 * KiB + 1), 2 * MiB);
  EXPECT_EQ(cub.block_size(2 * MiB), 2 * MiB);
  EXPECT_EQ(cub.block_size(2 * MiB + 1), 2 * MiB + 1);

  cub.allocate(513);
  EXPECT_EQ(cub.allocated_bytes(), 4 * KiB);
  cub.allocate(2 * MiB + 1);
  EXPECT_EQ(cub.allocated_bytes(), 4 * KiB + 2 * MiB + 1);
  EXPECT_EQ(cub.reserved_bytes(), cub.allocated_bytes());
  cub.validate();
}

TEST(cub_bins, reuses_a_cached_block_of_the_same_bin_only) {
  sim_device dev(small_device(64 * MiB));
  cub_bins_resource cub(dev);
  const device_ptr a = cub.allocate(1000);  // 4 KiB bin
  cub.deallocate(a, 1000);
  EXPECT_EQ(cub.cached_bytes(), 4 * KiB);
  EXPECT_EQ(cub.reserved_bytes(), 4 * KiB);
  EXPECT_EQ(cub.allocated_bytes(), 0u);
  EXPECT_EQ(cub.free_memory().total, 4 * KiB);

  EXPECT_EQ(cub.allocate(3000), a);  // same 4 KiB bin: the cached block, no device call
  EXPECT_EQ(calls(dev, device_call::legacy_malloc), 1u);

  const device_ptr c = cub.allocate(5000);  // 32 KiB bin: a new block
  EXPECT_EQ(calls(dev, device_call::legacy_malloc), 2u);
  cub.deallocate(c, 5000);
  // A cached 32 KiB block does not serve the 512 B bin.
  const device_ptr d = cub.allocate(100);
  EXPECT_NE(d, c);
  EXPECT_EQ(calls(dev, device_call::legacy_malloc), 3u);
  EXPECT_EQ(cub.cached_bytes(), 32 * KiB);
  EXPECT_EQ(cub.free_memory().largest, 32 * KiB);
  cub.validate();
}

TEST(cub_bins, the_oldest_cached_block_of_a_bin_comes_first) {
  sim_device dev(small_device(64 * MiB));
  cub_bins_resource cub(dev);
  const device_ptr x = cub.allocate(1000);
  const device_ptr y = cub.allocate(1000);
  cub.deallocate(x, 1000);
  cub.deallocate(y, 1000);
  EXPECT_EQ(cub.allocate(1000), x);  // first in, first out within the bin
  EXPECT_EQ(cub.allocate(1000), y);
}

TEST(cub_bins, frees_to_the_device_past_max_cached_bytes) {
  sim_device dev(small_device(64 * MiB));
  cub_bins_resource cub(dev);
  const device_ptr a = cub.allocate(2 * MiB);
  const device_ptr b = cub.allocate(2 * MiB);
  const device_ptr c = cub.allocate(2 * MiB);
  cub.deallocate(a, 2 * MiB);  // cached: 0 + 2,097,152 <= 6,291,455
  cub.deallocate(b, 2 * MiB);  // cached: 2,097,152 + 2,097,152 = 4,194,304 <= 6,291,455
  EXPECT_EQ(calls(dev, device_call::legacy_free), 0u);
  cub.deallocate(c, 2 * MiB);  // 4,194,304 + 2,097,152 = 6,291,456 > 6,291,455: to the device
  EXPECT_EQ(calls(dev, device_call::legacy_free), 1u);
  EXPECT_EQ(cub.cached_bytes(), 4 * MiB);
  EXPECT_EQ(cub.cached_blocks(), 2u);
  EXPECT_EQ(cub.reserved_bytes(), 4 * MiB);
  cub.validate();

  // One byte more of limit keeps all three.
  auto roomy = make_cub_bins_resource(dev, {{"max_cached_bytes", "6MiB"}});
  const device_ptr p = roomy->allocate(2 * MiB);
  const device_ptr q = roomy->allocate(2 * MiB);
  const device_ptr r = roomy->allocate(2 * MiB);
  const auto frees = calls(dev, device_call::legacy_free);
  roomy->deallocate(p, 2 * MiB);
  roomy->deallocate(q, 2 * MiB);
  roomy->deallocate(r, 2 * MiB);
  EXPECT_EQ(calls(dev, device_call::legacy_free), frees);
  EXPECT_EQ(roomy->reserved_bytes(), 6 * MiB);
}

TEST(cub_bins, blocks_above_the_largest_bin_go_straight_back) {
  sim_device dev(small_device(64 * MiB));
  cub_bins_resource cub(dev);
  const device_ptr p = cub.allocate(3 * MiB);  // exact: 3,145,728 bytes
  EXPECT_EQ(cub.reserved_bytes(), 3 * MiB);
  cub.deallocate(p, 3 * MiB);
  EXPECT_EQ(calls(dev, device_call::legacy_free), 1u);
  EXPECT_EQ(cub.reserved_bytes(), 0u);
  EXPECT_EQ(cub.cached_blocks(), 0u);
  EXPECT_EQ(dev.used_bytes(), 0u);
}

TEST(cub_bins, a_refused_block_frees_the_whole_cache_and_retries_once) {
  sim_device dev(small_device(8 * MiB));
  cub_bins_resource cub(dev);
  const device_ptr a = cub.allocate(2 * MiB);
  const device_ptr b = cub.allocate(2 * MiB);
  cub.allocate(2 * MiB);
  cub.deallocate(a, 2 * MiB);
  cub.deallocate(b, 2 * MiB);
  EXPECT_EQ(dev.used_bytes(), 6 * MiB);  // 4 MiB of it cached

  // 4 MiB + 1 B is above the largest bin: exact. The device needs 3 pages (6 MiB) and has 2 MiB free: refused.
  // CUB frees both cached blocks (4 MiB back) and asks again: 6 MiB free now, granted.
  const device_ptr big = cub.allocate(4 * MiB + 1);
  EXPECT_NE(big, 0u);
  EXPECT_EQ(calls(dev, device_call::legacy_malloc), 3u + 2u);
  EXPECT_EQ(calls(dev, device_call::legacy_free), 2u);
  EXPECT_EQ(cub.cached_bytes(), 0u);
  EXPECT_EQ(cub.reserved_bytes(), 2 * MiB + 4 * MiB + 1);
  EXPECT_EQ(dev.used_bytes(), 8 * MiB);
  cub.validate();

  // Now the device is full and nothing is cached: refused, retried, refused again.
  EXPECT_EQ(cub.try_allocate(1), 0u);
  EXPECT_EQ(calls(dev, device_call::legacy_malloc), 5u + 2u);
  EXPECT_THROW(cub.allocate(1), out_of_memory);
  EXPECT_EQ(cub.reserved_bytes(), 2 * MiB + 4 * MiB + 1);
  cub.validate();
}

TEST(cub_bins, another_stream_reuses_a_block_only_once_its_event_completed) {
  sim_device dev(small_device(64 * MiB));
  cub_bins_resource cub(dev);
  dev.hold(1);
  const device_ptr a = cub.allocate(1000, 1);
  cub.deallocate(a, 1000, 2);  // the stream given here is ignored: a's event is recorded on stream 1 (held)
  EXPECT_EQ(calls(dev, device_call::event_record), 1u);

  // Stream 2: a's event has not completed, so a new block.
  const device_ptr b = cub.allocate(1000, 2);
  EXPECT_NE(b, a);
  EXPECT_EQ(calls(dev, device_call::event_query), 1u);
  EXPECT_EQ(calls(dev, device_call::legacy_malloc), 2u);

  // Stream 1 itself takes it back at once, without asking the event.
  EXPECT_EQ(cub.allocate(1000, 1), a);
  EXPECT_EQ(calls(dev, device_call::event_query), 1u);
  cub.deallocate(a, 1000, 1);  // cached again, event recorded on stream 1 (still held)

  dev.release(1);
  // Stream 2 now: the event has completed, the block is reused.
  EXPECT_EQ(cub.allocate(1000, 2), a);
  EXPECT_EQ(calls(dev, device_call::event_query), 2u);
  EXPECT_EQ(calls(dev, device_call::legacy_malloc), 2u);
  cub.validate();
}

TEST(cub_bins, a_held_streams_block_is_passed_over_for_the_next_in_the_bin) {
  sim_device dev(small_device(64 * MiB));
  cub_bins_resource cub(dev);
  const device_ptr x = cub.allocate(1000, 1);
  const device_ptr y = cub.allocate(1000, 2);
  dev.hold(1);
  cub.deallocate(x, 1000);  // older in the bin, but stream 1 is held
  cub.deallocate(y, 1000);  // stream 2 runs freely: its event completes at once
  // Stream 3: x's event is not done (query 1), y's is (query 2): y.
  EXPECT_EQ(cub.allocate(1000, 3), y);
  EXPECT_EQ(calls(dev, device_call::event_query), 2u);
  cub.validate();
}

TEST(cub_bins, bad_frees_throw_and_change_nothing) {
  sim_device dev(small_device(64 * MiB));
  cub_bins_resource cub(dev);
  const device_ptr a = cub.allocate(1000);
  const device_ptr b = cub.allocate(3000);
  cub.deallocate(b, 3000);  // cached
  const auto allocated = cub.allocated_bytes();
  const auto reserved = cub.reserved_bytes();
  const auto cached = cub.cached_blocks();

  EXPECT_THROW(cub.deallocate(a + 512, 512), usage_error);     // inside a block
  EXPECT_THROW(cub.deallocate(0x1234000, 1000), usage_error);  // never allocated
  EXPECT_THROW(cub.deallocate(b, 3000), usage_error);          // double free (b is cached, not live)
  EXPECT_THROW(cub.deallocate(a, 1001), usage_error);          // wrong size (same bin, still wrong)
  EXPECT_EQ(cub.allocated_bytes(), allocated);
  EXPECT_EQ(cub.reserved_bytes(), reserved);
  EXPECT_EQ(cub.cached_blocks(), cached);
  EXPECT_EQ(calls(dev, device_call::legacy_free), 0u);
  cub.validate();
  cub.deallocate(a, 1000);
  EXPECT_EQ(cub.allocated_bytes(), 0u);
}

TEST(cub_bins, release_cached_and_destruction_give_everything_back) {
  sim_device dev(small_device(64 * MiB));
  {
    cub_bins_resource cub(dev);
    const device_ptr p = cub.allocate(100);
    const device_ptr q = cub.allocate(10 * KiB);
    const device_ptr r = cub.allocate(100 * KiB);
    cub.allocate(1 * MiB);  // stays live
    cub.deallocate(p, 100);
    cub.deallocate(q, 10 * KiB);
    cub.deallocate(r, 100 * KiB);
    EXPECT_EQ(cub.cached_bytes(), 512u + 32 * KiB + 256 * KiB);
    cub.release_cached();  // CUB's FreeAllCached
    EXPECT_EQ(calls(dev, device_call::legacy_free), 3u);
    EXPECT_EQ(cub.cached_bytes(), 0u);
    EXPECT_EQ(cub.reserved_bytes(), 2 * MiB);
    cub.validate();
  }
  EXPECT_EQ(dev.used_bytes(), 0u);
}

TEST(cub_bins, settings) {
  sim_device dev(small_device(64 * MiB));
  auto r = make_cub_bins_resource(dev, {{"bin_growth", "4"}, {"min_bin", "4"}, {"max_bin", "8"}});
  auto& cub = dynamic_cast<cub_bins_resource&>(*r);
  // Bins 4^4 = 256 B .. 4^8 = 64 KiB.
  EXPECT_EQ(cub.block_size(1), 256u);
  EXPECT_EQ(cub.block_size(300), 1024u);
  EXPECT_EQ(cub.block_size(64 * KiB), 64 * KiB);
  EXPECT_EQ(cub.block_size(64 * KiB + 1), 64 * KiB + 1);
  EXPECT_EQ(cub.options().max_cached_bytes, 6'291'455u);  // unchanged unless given

  EXPECT_THROW(make_cub_bins_resource(dev, {{"bins", "4"}}), usage_error);
  EXPECT_THROW(make_cub_bins_resource(dev, {{"min_bin", "8"}, {"max_bin", "7"}}), usage_error);
  EXPECT_THROW(make_cub_bins_resource(dev, {{"bin_growth", "1"}}), usage_error);
  EXPECT_THROW(make_cub_bins_resource(dev, {{"max_bin", "seven"}}), usage_error);
  EXPECT_THROW(make_cub_bins_resource(dev, {{"bin_growth", "2"}, {"max_bin", "64"}}), usage_error);  // 2^64
}

TEST(cub_bins, seeded_run_keeps_every_invariant) {
  sim_device dev(small_device(48 * MiB));
  cub_bins_resource cub(dev);
  std::mt19937_64 rng(7);
  struct live {
    device_ptr p;
    std::size_t bytes;
  };
  std::vector<live> alive;
  int refused = 0;
  for (int step = 0; step < 20000; ++step) {
    if (step % 500 == 0) {
      if ((step / 500) % 2 == 0) dev.hold(1);
      else dev.release(1);
    }
    const stream_id s = rng() % 3;
    if (alive.empty() || rng() % 100 < 52) {
      const std::size_t bytes = rng() % 20 == 0 ? 1 + rng() % (4 * MiB) : 1 + rng() % (300 * KiB);
      const device_ptr p = cub.try_allocate(bytes, s);
      if (p != 0) {
        ASSERT_EQ(p % 512, 0u);
        alive.push_back(live{p, bytes});
      } else {
        ++refused;
      }
    } else {
      const std::size_t i = rng() % alive.size();
      cub.deallocate(alive[i].p, alive[i].bytes, s);
      alive[i] = alive.back();
      alive.pop_back();
    }
    cub.validate();
    ASSERT_LE(dev.used_bytes(), dev.capacity());
  }
  EXPECT_GT(refused, 0);  // the run reached the free-all-and-retry path
  EXPECT_GT(calls(dev, device_call::event_query), 0u);
}

}  // namespace
}  // namespace vram
