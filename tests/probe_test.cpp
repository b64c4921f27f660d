// The probe over the device seam, on the simulated device, with every answer worked out by hand; and the
// reading of a pool snapshot's free ranges.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/device/probe.hpp"
#include "vram/device/sim_device.hpp"

namespace vram {
namespace {

using ::testing::HasSubstr;

sim_device_options one_gib() {
  sim_device_options o;
  o.capacity = 1 * GiB;
  o.label = "test device";
  return o;
}

/// A device that, unlike the simulated one, grants no legacy block over @p max_block bytes: it stands for
/// a driver that cannot find one contiguous range, so the binary search has work to do.
class capped_device final : public device {
 public:
  capped_device(sim_device& inner, std::size_t max_block) : inner_(inner), max_block_(max_block) {}
  std::string name() const override { return "capped " + inner_.name(); }
  std::size_t granularity() const override { return inner_.granularity(); }
  memory_info mem_info() override {
    calls_.add(device_call::mem_get_info, 0);
    return inner_.mem_info();
  }
  bool simulated() const noexcept override { return true; }
  device_ptr legacy_malloc(std::size_t bytes) override {
    calls_.add(device_call::legacy_malloc, 0);
    return bytes > max_block_ ? 0 : inner_.legacy_malloc(bytes);
  }
  void legacy_free(device_ptr p) override { inner_.legacy_free(p); }
  device_ptr address_reserve(std::size_t b, std::size_t a) override { return inner_.address_reserve(b, a); }
  void address_free(device_ptr va, std::size_t b) override { inner_.address_free(va, b); }
  phys_handle mem_create(std::size_t b) override { return inner_.mem_create(b); }
  void mem_release(phys_handle h) override { inner_.mem_release(h); }
  void mem_map(device_ptr va, std::size_t b, phys_handle h) override { inner_.mem_map(va, b, h); }
  void mem_unmap(device_ptr va, std::size_t b) override { inner_.mem_unmap(va, b); }
  void set_access(device_ptr va, std::size_t b) override { inner_.set_access(va, b); }
  event_id event_create() override { return inner_.event_create(); }
  void event_destroy(event_id e) override { inner_.event_destroy(e); }
  void event_record(event_id e, stream_id s) override { inner_.event_record(e, s); }
  bool event_query(event_id e) override { return inner_.event_query(e); }
  void event_synchronize(event_id e) override { inner_.event_synchronize(e); }
  void stream_synchronize(stream_id s) override { inner_.stream_synchronize(s); }
  void device_synchronize() override { inner_.device_synchronize(); }

 private:
  sim_device& inner_;
  std::size_t max_block_;
};

// ---- the brief's fragmented state -------------------------------------------------------------------

// 1 GiB device, 64 blocks of 16 MiB (the whole device), every other one freed: 32 x 16 MiB = 512 MiB free
// in 16 MiB pieces. The simulated device grants any free bytes to one request (as the H200 maps scattered
// pages into one range), so the largest block is all 512 MiB.
TEST(probe, fragmented_sim_device_gives_its_free_memory_in_one_block) {
  sim_device dev(one_gib());
  std::vector<device_ptr> blocks;
  for (int i = 0; i < 64; ++i) {
    blocks.push_back(dev.legacy_malloc(16 * MiB));
    ASSERT_NE(blocks.back(), 0u);
  }
  EXPECT_EQ(dev.mem_info().free, 0u);
  for (int i = 0; i < 64; i += 2) dev.legacy_free(blocks[i]);
  const auto mallocs_before = dev.calls().calls(device_call::legacy_malloc);

  const probe_result r = probe(dev);
  EXPECT_EQ(r.before.free, 512 * MiB);
  EXPECT_EQ(r.before.total, 1 * GiB);
  EXPECT_EQ(r.step, 2 * MiB);
  // Binary search: the first try is all 512 MiB (256 steps of 2 MiB) and it is granted.
  EXPECT_EQ(r.largest.bytes, 512 * MiB);
  EXPECT_EQ(r.largest.tries, 1u);
  // Halving: total / 2 = 512 MiB is granted at once.
  EXPECT_EQ(r.halving.bytes, 512 * MiB);
  EXPECT_EQ(r.halving.tries, 1u);
  EXPECT_EQ(r.fragmentation, 0.0);
  // Allocatable: one search (1 try) and one take of 512 MiB; then 0 is free, and no more tries.
  EXPECT_EQ(r.allocatable, 512 * MiB);
  EXPECT_EQ(r.blocks, 1u);
  EXPECT_EQ(r.allocatable_tries, 2u);
  EXPECT_FALSE(r.capped);
  // 1 + 1 + 2 legacy_malloc calls in all, and the device is left as it was.
  EXPECT_EQ(dev.calls().calls(device_call::legacy_malloc) - mallocs_before, 4u);
  EXPECT_EQ(dev.used_bytes(), 512 * MiB);
  dev.validate();
}

// 1 GiB device holding 324 MiB: 700 MiB free. Halving tries total / 2 = 512 MiB first, which fits, and stops
// there, missing 188 MiB; the binary search's first try, all 700 MiB (350 steps), fits.
TEST(probe, halving_stops_at_the_first_power_of_two_that_fits) {
  sim_device dev(one_gib());
  const device_ptr held = dev.legacy_malloc(324 * MiB);
  ASSERT_NE(held, 0u);
  const probe_result r = probe(dev);
  EXPECT_EQ(r.before.free, 700 * MiB);
  EXPECT_EQ(r.largest.bytes, 700 * MiB);
  EXPECT_EQ(r.largest.tries, 1u);
  EXPECT_EQ(r.halving.bytes, 512 * MiB);
  EXPECT_EQ(r.halving.tries, 1u);
  EXPECT_EQ(r.allocatable, 700 * MiB);
  EXPECT_EQ(r.blocks, 1u);
  EXPECT_EQ(dev.used_bytes(), 324 * MiB);
}

// ---- a device with a largest block smaller than its free memory -------------------------------------

// 1 GiB free, no block over 300 MiB (150 steps of 2 MiB). The search, upper 512 steps:
//   512 no; down from the top by 1, 2, 4, ...: 511, 509, 505, 497, 481, 449, 385, 257 no, 1 yes (9 tries);
//   then binary between 1 and 257: 129 yes, 193 no, 161 no, 145 yes, 153 no, 149 yes, 151 no, 150 yes
//   -> 150 steps = 300 MiB in 1 + 9 + 8 = 18 tries (the worst case: the answer far below the top).
// Halving from total / 2: 512 MiB no, 256 MiB yes -> 256 MiB in 2 tries.
// Allocatable: 300 (1 try + take), 300 (free 724: 1 + take), 300 (free 424: 1 + take), then free 124 MiB:
//   upper min(300, 124) = 124 MiB, 1 try + take; then free 0: no try. 1024 MiB in 4 blocks, 8 tries.
// Fragmentation: 1 - 300 / 1024 = 724 / 1024 = 0.70703125 (exact in binary).
TEST(probe, binary_search_finds_the_largest_block_exactly) {
  sim_device sim(one_gib());
  capped_device dev(sim, 300 * MiB);
  const probe_result r = probe(dev);
  EXPECT_EQ(r.largest.bytes, 300 * MiB);
  EXPECT_EQ(r.largest.tries, 18u);
  EXPECT_EQ(r.halving.bytes, 256 * MiB);
  EXPECT_EQ(r.halving.tries, 2u);
  EXPECT_EQ(r.allocatable, 1 * GiB);
  EXPECT_EQ(r.blocks, 4u);
  EXPECT_EQ(r.allocatable_tries, 8u);
  EXPECT_EQ(r.fragmentation, 0.70703125);
  EXPECT_EQ(dev.calls().calls(device_call::legacy_malloc), 18u + 2u + 8u);
  EXPECT_EQ(sim.used_bytes(), 0u);
  sim.validate();
}

// The same device with max_blocks = 2: two blocks of 300 MiB, and it says it stopped with more fitting.
TEST(probe, allocatable_stops_at_max_blocks_and_says_so) {
  sim_device sim(one_gib());
  capped_device dev(sim, 300 * MiB);
  probe_options o;
  o.max_blocks = 2;
  const probe_result r = probe(dev, o);
  EXPECT_EQ(r.allocatable, 600 * MiB);
  EXPECT_EQ(r.blocks, 2u);
  EXPECT_TRUE(r.capped);
  EXPECT_EQ(sim.used_bytes(), 0u);
}

// A full device: nothing to find. Halving tries 512, 256, ..., 2 MiB (9 sizes), none fits.
TEST(probe, full_device_finds_nothing) {
  sim_device dev(one_gib());
  const device_ptr all = dev.legacy_malloc(1 * GiB);
  ASSERT_NE(all, 0u);
  const probe_result r = probe(dev);
  EXPECT_EQ(r.before.free, 0u);
  EXPECT_EQ(r.largest.bytes, 0u);
  EXPECT_EQ(r.largest.tries, 0u);
  EXPECT_EQ(r.halving.bytes, 0u);
  EXPECT_EQ(r.halving.tries, 9u);
  EXPECT_EQ(r.allocatable, 0u);
  EXPECT_EQ(r.blocks, 0u);
  EXPECT_EQ(r.fragmentation, 0.0);
}

// 1001 MiB of capacity: the search is exact to the step, so it finds floor(1001 / 2) * 2 = 1000 MiB.
TEST(probe, answers_are_exact_to_the_step) {
  sim_device_options o = one_gib();
  o.capacity = 1001 * MiB;
  sim_device dev(o);
  const probe_result r = probe(dev);
  EXPECT_EQ(r.largest.bytes, 1000 * MiB);
  EXPECT_EQ(r.largest.tries, 1u);
  EXPECT_DOUBLE_EQ(r.fragmentation, 1.0 - 1000.0 / 1001.0);
  // A 1 MiB step: 1001 MiB is refused (the simulated device gives blocks over 1 MiB whole 2 MiB pages, and
  // 1002 MiB is more than there is); one step down, 1000 MiB fits: 2 tries.
  probe_options fine;
  fine.step = 1 * MiB;
  const block_search s = probe(dev, fine).largest;
  EXPECT_EQ(s.bytes, 1000 * MiB);
  EXPECT_EQ(s.tries, 2u);
}

// The common case on a GPU: the largest block a little under the free memory. On the H200, 71,314.56
// granules were free, 71,314 were refused and 71,313 granted. Here: cap 1022 MiB = 511 steps, upper 512:
// 512 no, 511 yes -> 2 tries. Cap 1018 MiB = 509 steps: 512 no, 511 no, 509 yes; then between 509 and 511:
// 510 no -> 4 tries. (A plain binary search from 0 would take 1 + 9 tries for either.)
TEST(probe, a_block_just_under_the_free_memory_takes_few_tries) {
  sim_device sim(one_gib());
  capped_device one_under(sim, 1022 * MiB);
  const block_search a = find_largest_block(one_under, 1 * GiB, 2 * MiB);
  EXPECT_EQ(a.bytes, 1022 * MiB);
  EXPECT_EQ(a.tries, 2u);
  capped_device three_under(sim, 1018 * MiB);
  const block_search b = find_largest_block(three_under, 1 * GiB, 2 * MiB);
  EXPECT_EQ(b.bytes, 1018 * MiB);
  EXPECT_EQ(b.tries, 4u);
}

TEST(probe, searches_alone) {
  sim_device sim(one_gib());
  capped_device dev(sim, 100 * MiB);
  // Upper 64 MiB (32 steps) fits at once.
  EXPECT_EQ(find_largest_block(dev, 64 * MiB, 2 * MiB).bytes, 64 * MiB);
  EXPECT_EQ(find_largest_block(dev, 64 * MiB, 2 * MiB).tries, 1u);
  // Upper under one step: no try.
  EXPECT_EQ(find_largest_block(dev, 1 * MiB, 2 * MiB).tries, 0u);
  // Halving 1 GiB: 512, 256, 128 no; 64 yes: 4 tries.
  const block_search h = find_block_by_halving(dev, 1 * GiB, 2 * MiB);
  EXPECT_EQ(h.bytes, 64 * MiB);
  EXPECT_EQ(h.tries, 4u);
  EXPECT_EQ(fragmentation(0, 0), 0.0);
  EXPECT_EQ(fragmentation(1, 4), 0.75);
}

// ---- pool snapshots ---------------------------------------------------------------------------------

// Free ranges of 2, 6 and 8 MiB: 16 MiB free, largest 8 MiB, fragmentation 1 - 8/16 = 0.5.
TEST(probe_snapshot, summarizes_free_ranges) {
  const auto j = nlohmann::json::parse(R"({"policy": "vram", "device": "simulated H200", "reserved_bytes": 33554432,
    "free_ranges": [[70368744177664, 2097152], ["0x400000200000", 6291456], [70368752566272, 8388608]]})");
  const free_ranges_summary s = summarize_snapshot(j);
  EXPECT_EQ(s.ranges, 3u);
  EXPECT_EQ(s.free_bytes, 16 * MiB);
  EXPECT_EQ(s.largest, 8 * MiB);
  EXPECT_EQ(s.fragmentation, 0.5);
  EXPECT_EQ(s.reserved_bytes, 32 * MiB);
  EXPECT_EQ(s.policy, "vram");
  EXPECT_EQ(s.device, "simulated H200");
}

TEST(probe_snapshot, an_empty_pool_has_no_fragmentation) {
  const free_ranges_summary s = summarize_snapshot(nlohmann::json::parse(R"({"free_ranges": []})"));
  EXPECT_EQ(s.ranges, 0u);
  EXPECT_EQ(s.free_bytes, 0u);
  EXPECT_EQ(s.fragmentation, 0.0);
}

TEST(probe_snapshot, malformed_snapshots_name_the_problem) {
  auto message = [](const char* text) -> std::string {
    try {
      summarize_snapshot(nlohmann::json::parse(text));
    } catch (const input_error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(message("[1, 2]"), HasSubstr("not a JSON object"));
  EXPECT_THAT(message(R"({"ranges": []})"), HasSubstr("no \"free_ranges\" array"));
  EXPECT_THAT(message(R"({"free_ranges": [[1]]})"), HasSubstr("free_ranges[0] is not [address, bytes]"));
  EXPECT_THAT(message(R"({"free_ranges": [[1, 2], [3, -4]]})"), HasSubstr("free_ranges[1]: the size"));
  EXPECT_THAT(message(R"({"free_ranges": [["0xZZ", 4]]})"), HasSubstr("free_ranges[0]: the address"));
  EXPECT_THAT(message(R"({"free_ranges": [[4096, 512], [8192, 0]]})"), HasSubstr("free_ranges[1] has 0 bytes"));
  // 2^64 - 1 bytes from address 1 end at 2^64, one past the last address: the two would sum past 2^64.
  EXPECT_THAT(message(R"({"free_ranges": [[18446744073709551615, 18446744073709551615], [1, 18446744073709551615]]})"),
              HasSubstr("free_ranges[0] runs past the end of the address space"));
  EXPECT_THAT(message(R"({"free_ranges": [[1, 18446744073709551615]]})"),
              HasSubstr("free_ranges[0] runs past the end of the address space"));
  // [0x1000, 0x3000) and [0x2000, 0x2200) share [0x2000, 0x2200).
  EXPECT_THAT(message(R"({"free_ranges": [[8192, 512], [4096, 8192]]})"),
              HasSubstr("free ranges overlap: [0x1000, 0x3000) and [0x2000, 0x2200)"));
  // Touching is not overlapping: [0x1000, 0x2000) and [0x2000, 0x2200).
  EXPECT_EQ(message(R"({"free_ranges": [[8192, 512], [4096, 4096]]})"), "no error");
}

TEST(probe_snapshot, reads_a_file_and_names_it_in_errors) {
  const std::string path = ::testing::TempDir() + "vram_probe_snapshot.json";
  {
    std::ofstream out(path);
    out << R"({"free_ranges": [[4096, 1048576], [8388608, 3145728]]})";
  }
  const free_ranges_summary s = read_snapshot_file(path);
  EXPECT_EQ(s.free_bytes, 4 * MiB);
  EXPECT_EQ(s.largest, 3 * MiB);
  EXPECT_EQ(s.fragmentation, 0.25);
  std::remove(path.c_str());
  try {
    read_snapshot_file(path);
    FAIL() << "a missing file was read";
  } catch (const input_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
  }
  const std::string folder = ::testing::TempDir();
  try {
    read_snapshot_file(folder);
    FAIL() << "a folder was read";
  } catch (const input_error& e) {
    EXPECT_EQ(std::string(e.what()), folder + ": cannot open: it is a folder");
  }
}

}  // namespace
}  // namespace vram
