// The `cuda-direct` policy: one driver call per allocate and deallocate, the accounting of reserved bytes as
// the device packs blocks, and bad frees. Expected figures are worked out by hand in comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/emulation/cuda_direct_resource.hpp"

namespace vram {
namespace {

using ::testing::HasSubstr;

sim_device_options device_of(std::size_t capacity) {
  sim_device_options o;
  o.capacity = capacity;
  return o;
}

TEST(cuda_direct, one_driver_call_per_allocate_and_deallocate) {
  sim_device dev;
  cuda_direct_resource mr(dev);
  EXPECT_EQ(mr.name(), "cuda-direct");
  const device_ptr a = mr.allocate(1000);
  const device_ptr b = mr.allocate(3 * MiB, 5);
  EXPECT_EQ(dev.calls().calls(device_call::legacy_malloc), 2u);
  mr.deallocate(a, 1000);
  mr.deallocate(b, 3 * MiB, 5);
  EXPECT_EQ(dev.calls().calls(device_call::legacy_free), 2u);
  EXPECT_EQ(dev.calls().total_calls(), 4u);
  EXPECT_EQ(mr.reserved_bytes(), 0u);
  EXPECT_EQ(mr.allocated_bytes(), 0u);
  EXPECT_EQ(dev.used_bytes(), 0u);
  mr.validate();
}

TEST(cuda_direct, zero_bytes_is_null_and_free_of_null_does_nothing) {
  sim_device dev;
  cuda_direct_resource mr(dev);
  EXPECT_EQ(mr.allocate(0), 0u);
  mr.deallocate(0, 0);
  mr.deallocate(0, 64);
  EXPECT_EQ(dev.calls().total_calls(), 0u);
}

TEST(cuda_direct, blocks_are_aligned_and_disjoint) {
  sim_device dev;
  cuda_direct_resource mr(dev);
  std::vector<std::pair<device_ptr, std::size_t>> blocks;
  for (std::size_t bytes : {1ul, 511ul, 512ul, 513ul, 4095ul, 1ul << 20, (1ul << 20) + 1, 7ul << 20}) {
    blocks.emplace_back(mr.allocate(bytes), bytes);
    EXPECT_EQ(blocks.back().first % 512, 0u) << bytes;
  }
  std::sort(blocks.begin(), blocks.end());
  for (std::size_t i = 1; i < blocks.size(); ++i) {
    EXPECT_LE(blocks[i - 1].first + blocks[i - 1].second, blocks[i].first);
  }
  mr.validate();
}

TEST(cuda_direct, accounting_follows_the_device_packing) {
  sim_device dev;
  cuda_direct_resource mr(dev);
  const device_ptr a = mr.allocate(1000);  // rounds to 1024; a 2 MiB page holds 2048 of them
  EXPECT_EQ(mr.allocated_bytes(), 1024u);
  EXPECT_EQ(mr.reserved_bytes(), 2 * MiB);
  auto fs = mr.free_memory();
  EXPECT_EQ(fs.total, 2 * MiB - 1024);
  EXPECT_EQ(fs.largest, 2 * MiB - 1024);  // the most free bytes of one shared page: a's
  const device_ptr b = mr.allocate(3 * MiB);  // 4 MiB of its own
  EXPECT_EQ(mr.allocated_bytes(), 3 * MiB + 1024);
  EXPECT_EQ(mr.reserved_bytes(), 6 * MiB);
  EXPECT_EQ(mr.free_memory().total, 3 * MiB - 1024);  // 6 MiB - (3 MiB + 1 KiB)
  EXPECT_EQ(mr.free_memory().largest, 2 * MiB - 1024);  // the 1 MiB tail of b's pages is not a shared page
  const device_ptr c = mr.allocate(1 * MiB);  // a page of its own (the simulated device keeps one size a page)
  EXPECT_EQ(mr.reserved_bytes(), 8 * MiB);
  EXPECT_EQ(mr.free_memory().largest, 2 * MiB - 1024);  // a's page still has the most free bytes
  const device_ptr d = mr.allocate(1 * MiB);  // fills c's page
  EXPECT_EQ(mr.reserved_bytes(), 8 * MiB);
  EXPECT_EQ(mr.free_memory().largest, 2 * MiB - 1024);
  EXPECT_EQ(mr.reserved_bytes(), dev.used_bytes());
  mr.validate();
  mr.deallocate(c, 1 * MiB);  // the page stays: d lives in it
  EXPECT_EQ(mr.reserved_bytes(), 8 * MiB);
  EXPECT_EQ(mr.free_memory().largest, 2 * MiB - 1024);
  mr.deallocate(d, 1 * MiB);
  mr.deallocate(a, 1000);
  EXPECT_EQ(mr.reserved_bytes(), 4 * MiB);
  EXPECT_EQ(mr.free_memory().largest, 0u);
  EXPECT_EQ(mr.free_memory().total, 1 * MiB);
  mr.deallocate(b, 3 * MiB);
  EXPECT_EQ(mr.reserved_bytes(), 0u);
  mr.validate();
}

TEST(cuda_direct, the_h200_packing_table_through_the_resource) {
  // 1000 x 64 KiB: 32 a page -> 32 pages = 64 MiB; 1000 x 3 MiB: 4 MiB each -> 4000 MiB, half 2000 MiB.
  for (const auto& [bytes, full, half] : {std::tuple{64 * KiB, 64 * MiB, 64 * MiB},
                                          std::tuple{3 * MiB, 4000 * MiB, 2000 * MiB}}) {
    sim_device dev;
    cuda_direct_resource mr(dev);
    std::vector<device_ptr> blocks;
    for (int i = 0; i < 1000; ++i) blocks.push_back(mr.allocate(bytes));
    EXPECT_EQ(mr.reserved_bytes(), full);
    EXPECT_EQ(mr.allocated_bytes(), 1000 * bytes);
    for (int i = 0; i < 1000; i += 2) mr.deallocate(blocks[i], bytes);
    EXPECT_EQ(mr.reserved_bytes(), half);
    EXPECT_EQ(mr.allocated_bytes(), 500 * bytes);
    mr.validate();
  }
}

TEST(cuda_direct, bad_frees_throw_usage_error_and_change_nothing) {
  sim_device dev;
  cuda_direct_resource mr(dev);
  const device_ptr a = mr.allocate(4 * KiB);
  const device_ptr b = mr.allocate(4 * KiB);
  mr.deallocate(b, 4 * KiB);
  const auto calls = dev.calls().total_calls();
  EXPECT_THROW(mr.deallocate(a + 512, 4 * KiB), usage_error);  // never handed out
  EXPECT_THROW(mr.deallocate(b, 4 * KiB), usage_error);        // double free
  EXPECT_THROW(mr.deallocate(a, 4 * KiB + 1), usage_error);    // wrong size, even within the rounding
  try {
    mr.deallocate(a, 8 * KiB);
    FAIL();
  } catch (const usage_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("allocated with 4096 bytes"));
  }
  EXPECT_EQ(dev.calls().total_calls(), calls);
  EXPECT_EQ(mr.allocated_bytes(), 4 * KiB);
  EXPECT_EQ(mr.reserved_bytes(), 2 * MiB);
  EXPECT_EQ(mr.live_blocks(), 1u);
  mr.validate();
  mr.deallocate(a, 4 * KiB);
  EXPECT_EQ(dev.used_bytes(), 0u);
}

TEST(cuda_direct, out_of_memory) {
  sim_device dev(device_of(8 * MiB));
  cuda_direct_resource mr(dev);
  const device_ptr a = mr.allocate(6 * MiB);
  EXPECT_EQ(mr.try_allocate(4 * MiB), 0u);  // 6 + 4 > 8
  try {
    mr.allocate(4 * MiB);
    FAIL();
  } catch (const out_of_memory& e) {
    EXPECT_THAT(e.what(), HasSubstr("cuda-direct"));
    EXPECT_THAT(e.what(), HasSubstr("4194304 bytes"));
  }
  EXPECT_EQ(mr.reserved_bytes(), 6 * MiB);
  mr.deallocate(a, 6 * MiB);
  EXPECT_NE(mr.try_allocate(8 * MiB), 0u);
}

TEST(cuda_direct, destructor_frees_live_blocks) {
  sim_device dev;
  {
    cuda_direct_resource mr(dev);
    mr.allocate(100);
    mr.allocate(5 * MiB);
    EXPECT_EQ(dev.used_bytes(), 8 * MiB);  // a 2 MiB page and 6 MiB
  }
  EXPECT_EQ(dev.used_bytes(), 0u);
}

TEST(cuda_direct, seeded_replay_matches_the_device) {
  // As the only legacy user, the resource's reserved bytes are the device's used bytes at every step.
  sim_device dev;
  cuda_direct_resource mr(dev);
  std::mt19937_64 rng(7);
  std::vector<std::pair<device_ptr, std::size_t>> live;
  std::size_t allocated = 0;
  for (int step = 0; step < 5000; ++step) {
    if (live.empty() || rng() % 5 < 3) {
      const std::size_t bytes = 1 + rng() % (rng() % 4 == 0 ? 8 * MiB : 64 * KiB);
      live.emplace_back(mr.allocate(bytes, rng() % 3), bytes);
      allocated += round_up(bytes, 512);
    } else {
      const std::size_t i = rng() % live.size();
      mr.deallocate(live[i].first, live[i].second);
      allocated -= round_up(live[i].second, 512);
      live[i] = live.back();
      live.pop_back();
    }
    ASSERT_EQ(mr.reserved_bytes(), dev.used_bytes()) << "step " << step;
    ASSERT_EQ(mr.allocated_bytes(), allocated) << "step " << step;
    if (step % 250 == 0) {
      mr.validate();
      dev.validate();
    }
  }
  mr.validate();
}

TEST(cuda_direct, factory_takes_no_settings) {
  sim_device dev;
  auto mr = make_cuda_direct_resource(dev, {});
  EXPECT_EQ(mr->name(), "cuda-direct");
  EXPECT_THROW(make_cuda_direct_resource(dev, {{"max_split_size_mb", "128"}}), usage_error);
}

}  // namespace
}  // namespace vram
