// The simulated device: legacy packing (the H200 table), capacity, the virtual memory contracts, the cost
// model, and stream / event ordering. Every expected figure is worked out by hand in a comment.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/device/sim_device.hpp"

namespace vram {
namespace {

using ::testing::HasSubstr;

sim_device_options small_device(std::size_t capacity) {
  sim_device_options o;
  o.capacity = capacity;
  o.label = "test device";
  return o;
}

std::uint64_t ns_of(const device& d, device_call c) { return d.calls().nanoseconds[static_cast<std::size_t>(c)]; }

// ---- legacy packing: the H200 table "How cudaMalloc packs blocks" -------------------------------------

struct packing_row {
  std::size_t block;
  std::size_t used_mib;       // after 1000 blocks
  std::size_t half_used_mib;  // after freeing every other block
};

class packing_test : public ::testing::TestWithParam<packing_row> {};

TEST_P(packing_test, matches_the_h200_table) {
  const auto row = GetParam();
  sim_device dev;
  std::vector<device_ptr> blocks;
  for (int i = 0; i < 1000; ++i) {
    blocks.push_back(dev.legacy_malloc(row.block));
    ASSERT_NE(blocks.back(), 0u);
    EXPECT_EQ(blocks.back() % 512, 0u);
  }
  EXPECT_EQ(dev.used_bytes(), row.used_mib * MiB);
  EXPECT_EQ(dev.mem_info().free, dev.capacity() - row.used_mib * MiB);
  for (int i = 0; i < 1000; i += 2) dev.legacy_free(blocks[i]);
  EXPECT_EQ(dev.used_bytes(), row.half_used_mib * MiB);
  dev.validate();
  for (int i = 1; i < 1000; i += 2) dev.legacy_free(blocks[i]);
  EXPECT_EQ(dev.used_bytes(), 0u);
  EXPECT_EQ(dev.peak_used_bytes(), row.used_mib * MiB);
  dev.validate();
}

// Blocks per 2 MiB page = floor(2 MiB / size); pages = ceil(1000 / per page); a page stays while any block
// in it lives, and every other block leaves each page at least one. Above 1 MiB: round up to 2 MiB pages.
INSTANTIATE_TEST_SUITE_P(
    h200, packing_test,
    ::testing::Values(packing_row{512, 2, 2},                // 4096 a page: 1 page
                      packing_row{1 * KiB, 2, 2},            // 2048 a page: 1 page (the 1000 x 1 KiB line)
                      packing_row{4 * KiB, 4, 4},            // 512 a page: 2 pages
                      packing_row{64 * KiB, 64, 64},         // 32 a page: ceil(1000/32) = 32 pages
                      packing_row{256 * KiB, 250, 250},      // 8 a page: 125 pages
                      packing_row{1 * MiB, 1000, 1000},      // 2 a page: 500 pages
                      packing_row{3 * MiB / 2, 2000, 1000},  // 2 MiB each
                      packing_row{2 * MiB, 2000, 1000},      // 2 MiB each
                      packing_row{3 * MiB, 4000, 2000}));    // 4 MiB each

TEST(sim_device_legacy, rounds_to_512_and_keeps_one_size_per_page) {
  sim_device dev;
  const device_ptr a = dev.legacy_malloc(1);
  const device_ptr b = dev.legacy_malloc(512);  // same rounded size (512): next slot of the same page
  const device_ptr c = dev.legacy_malloc(513);  // rounds to 1024: a page of its own
  EXPECT_EQ(a % (2 * MiB), 0u);
  EXPECT_EQ(b, a + 512);
  EXPECT_EQ(c % (2 * MiB), 0u);
  EXPECT_NE(c & ~(2 * MiB - 1), a & ~(2 * MiB - 1));
  EXPECT_EQ(dev.used_bytes(), 4 * MiB);
  const device_ptr big = dev.legacy_malloc(1 * MiB + 1);  // > 1 MiB: rounds to one 2 MiB page
  EXPECT_EQ(big % (2 * MiB), 0u);
  EXPECT_EQ(dev.used_bytes(), 6 * MiB);
  dev.validate();
}

TEST(sim_device_legacy, freed_slot_is_reused_before_the_page_grows) {
  sim_device dev;
  const device_ptr a = dev.legacy_malloc(1 * MiB);
  const device_ptr b = dev.legacy_malloc(1 * MiB);  // 2 a page: fills the page
  EXPECT_EQ(b, a + 1 * MiB);
  dev.legacy_free(a);
  EXPECT_EQ(dev.used_bytes(), 2 * MiB);  // b still lives in the page
  EXPECT_EQ(dev.legacy_malloc(1 * MiB), a);
  EXPECT_EQ(dev.used_bytes(), 2 * MiB);
  dev.validate();
}

TEST(sim_device_legacy, malloc_of_zero_returns_null) {
  sim_device dev;
  EXPECT_EQ(dev.legacy_malloc(0), 0u);
  EXPECT_EQ(dev.used_bytes(), 0u);
}

TEST(sim_device_legacy, capacity_exhaustion_returns_null) {
  sim_device dev(small_device(8 * MiB));
  EXPECT_EQ(dev.legacy_malloc(9 * MiB), 0u);       // more than the device
  const device_ptr a = dev.legacy_malloc(3 * MiB);  // 4 MiB
  const device_ptr b = dev.legacy_malloc(3 * MiB);  // 4 MiB: the device is full
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_EQ(dev.mem_info().free, 0u);
  EXPECT_EQ(dev.legacy_malloc(512), 0u);  // needs a new 2 MiB page
  EXPECT_EQ(dev.calls().calls(device_call::legacy_malloc), 4u);  // failed calls are made and counted
  dev.legacy_free(a);
  EXPECT_NE(dev.legacy_malloc(512), 0u);
  dev.validate();
}

TEST(sim_device_legacy, small_block_fits_a_full_device_when_its_page_has_room) {
  sim_device dev(small_device(2 * MiB));
  ASSERT_NE(dev.legacy_malloc(512), 0u);  // the whole device is now one 512-byte page
  EXPECT_NE(dev.legacy_malloc(512), 0u);  // same page, no new memory
  EXPECT_EQ(dev.legacy_malloc(1024), 0u);  // another size needs another page
  EXPECT_EQ(dev.used_bytes(), 2 * MiB);
}

TEST(sim_device_legacy, bad_frees_throw_and_change_nothing) {
  sim_device dev;
  const device_ptr small = dev.legacy_malloc(4 * KiB);
  const device_ptr large = dev.legacy_malloc(4 * MiB);
  dev.legacy_free(dev.legacy_malloc(4 * KiB));  // a freed slot in small's page
  const auto calls = dev.calls().total_calls();
  const auto used = dev.used_bytes();
  EXPECT_THROW(dev.legacy_free(0x1234), device_error);         // no page there
  EXPECT_THROW(dev.legacy_free(small + 4 * KiB), device_error);  // the freed slot: a double free
  EXPECT_THROW(dev.legacy_free(small + 512), device_error);     // inside a block
  EXPECT_THROW(dev.legacy_free(large + 2 * MiB), device_error);  // inside a large block
  EXPECT_THROW(dev.legacy_free(small + 8 * KiB), device_error);  // a slot never handed out
  EXPECT_EQ(dev.calls().total_calls(), calls);
  EXPECT_EQ(dev.used_bytes(), used);
  try {
    dev.legacy_free(small + 512);
    FAIL();
  } catch (const device_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("legacy_free(0x"));
  }
  dev.legacy_free(small);
  dev.legacy_free(large);
  EXPECT_THROW(dev.legacy_free(large), device_error);
  EXPECT_EQ(dev.used_bytes(), 0u);
  dev.validate();
}

TEST(sim_device_legacy, seeded_random_mix_keeps_the_books) {
  // Independent count of pages: small classes by page, large blocks by 2 MiB multiples.
  sim_device dev;
  std::mt19937_64 rng(42);
  std::vector<std::pair<device_ptr, std::size_t>> live;
  std::map<device_ptr, int> pages;  // small page -> live blocks
  std::size_t large = 0;
  const std::size_t sizes[] = {1, 700, 4 * KiB, 100 * KiB, 1 * MiB, 1 * MiB + 1, 5 * MiB};
  for (int step = 0; step < 4000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const std::size_t bytes = sizes[rng() % std::size(sizes)];
      const device_ptr p = dev.legacy_malloc(bytes);
      ASSERT_NE(p, 0u);
      live.emplace_back(p, bytes);
      if (bytes <= MiB) {
        pages[p & ~(2 * MiB - 1)] += 1;
      } else {
        large += round_up(bytes, 2 * MiB);
      }
    } else {
      const std::size_t i = rng() % live.size();
      const auto [p, bytes] = live[i];
      live[i] = live.back();
      live.pop_back();
      dev.legacy_free(p);
      if (bytes <= MiB) {
        if (--pages[p & ~(2 * MiB - 1)] == 0) pages.erase(p & ~(2 * MiB - 1));
      } else {
        large -= round_up(bytes, 2 * MiB);
      }
    }
    ASSERT_EQ(dev.used_bytes(), pages.size() * 2 * MiB + large) << "step " << step;
    if (step % 100 == 0) dev.validate();
  }
  dev.validate();
}

TEST(sim_device_legacy, concurrent_callers_keep_the_books) {
  sim_device dev;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&dev, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<device_ptr> mine;
      for (int i = 0; i < 2000; ++i) {
        if (mine.empty() || rng() % 2 == 0) {
          mine.push_back(dev.legacy_malloc(512 * (1 + rng() % 8)));
        } else {
          dev.legacy_free(mine.back());
          mine.pop_back();
        }
      }
      for (auto p : mine) dev.legacy_free(p);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(dev.used_bytes(), 0u);
  dev.validate();
}

// ---- virtual memory -----------------------------------------------------------------------------------

TEST(sim_device_vmm, reserve_aligns_and_never_meets_legacy_addresses) {
  sim_device dev;
  const device_ptr legacy = dev.legacy_malloc(64 * MiB);
  const device_ptr va = dev.address_reserve(64 * MiB);
  const device_ptr aligned = dev.address_reserve(2 * MiB, 64 * MiB);
  EXPECT_EQ(va % (2 * MiB), 0u);
  EXPECT_EQ(aligned % (64 * MiB), 0u);
  EXPECT_TRUE(va >= legacy + 64 * MiB || va + 64 * MiB <= legacy);
  EXPECT_EQ(dev.used_bytes(), 64 * MiB);  // reserving address space uses no memory
  EXPECT_THROW(dev.address_reserve(3 * MiB), device_error);          // not whole granules
  EXPECT_THROW(dev.address_reserve(0), device_error);
  EXPECT_THROW(dev.address_reserve(2 * MiB, 3 * MiB), device_error);  // alignment not a power of two
  dev.address_free(va, 64 * MiB);
  EXPECT_EQ(dev.address_reserve(64 * MiB), va);  // the range is reused, best fit
  dev.validate();
}

TEST(sim_device_vmm, mem_create_checks_size_and_capacity) {
  sim_device dev(small_device(8 * MiB));
  EXPECT_THROW(dev.mem_create(1 * MiB), device_error);
  EXPECT_THROW(dev.mem_create(0), device_error);
  const phys_handle a = dev.mem_create(6 * MiB);
  ASSERT_NE(a, 0u);
  EXPECT_EQ(dev.mem_create(4 * MiB), 0u);  // 6 + 4 > 8
  EXPECT_EQ(dev.legacy_malloc(4 * MiB), 0u);
  EXPECT_NE(dev.mem_create(2 * MiB), 0u);  // 6 + 2 = 8 fits exactly
  EXPECT_EQ(dev.used_bytes(), 8 * MiB);
  EXPECT_EQ(dev.calls().calls(device_call::mem_create), 3u);
}

TEST(sim_device_vmm, map_contracts) {
  sim_device dev;
  const device_ptr va = dev.address_reserve(8 * MiB);
  const phys_handle h2 = dev.mem_create(2 * MiB);
  const phys_handle h4 = dev.mem_create(4 * MiB);
  const phys_handle other = dev.mem_create(2 * MiB);
  dev.mem_map(va + 2 * MiB, 4 * MiB, h4);  // [va+2, va+6)
  EXPECT_THROW(dev.mem_map(va, 4 * MiB, h2), device_error);            // not the handle's size
  EXPECT_THROW(dev.mem_map(va + 4 * MiB, 2 * MiB, h2), device_error);  // overlaps h4
  EXPECT_THROW(dev.mem_map(va + 6 * MiB, 4 * MiB, h4), device_error);  // runs past the reservation
  EXPECT_THROW(dev.mem_map(va + 512, 2 * MiB, h2), device_error);      // not granule aligned
  EXPECT_THROW(dev.mem_map(va - 2 * MiB, 2 * MiB, h2), device_error);  // before the reservation
  EXPECT_THROW(dev.mem_map(va, 2 * MiB, 999), device_error);           // no such handle
  dev.mem_release(other);
  EXPECT_THROW(dev.mem_map(va, 2 * MiB, other), device_error);  // released
  try {
    dev.mem_map(va + 4 * MiB, 2 * MiB, h2);
    FAIL();
  } catch (const device_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("mem_map(va=0x"));
    EXPECT_THAT(e.what(), HasSubstr("overlaps the mapping"));
  }
  EXPECT_EQ(dev.calls().calls(device_call::mem_map), 1u);
  dev.mem_map(va, 2 * MiB, h2);      // [va, va+2): touches h4's mapping, does not overlap it
  dev.mem_map(va + 6 * MiB, 2 * MiB, h2);  // a handle may be mapped twice
  dev.validate();
}

TEST(sim_device_vmm, unmap_and_set_access_need_whole_mappings) {
  sim_device dev;
  const device_ptr va = dev.address_reserve(10 * MiB);
  const phys_handle a = dev.mem_create(4 * MiB);
  const phys_handle b = dev.mem_create(2 * MiB);
  dev.mem_map(va, 4 * MiB, a);            // [0, 4)
  dev.mem_map(va + 4 * MiB, 2 * MiB, b);  // [4, 6); [6, 10) unmapped
  EXPECT_THROW(dev.mem_unmap(va, 2 * MiB), device_error);            // half of a
  EXPECT_THROW(dev.mem_unmap(va + 2 * MiB, 4 * MiB), device_error);  // starts inside a
  EXPECT_THROW(dev.mem_unmap(va, 8 * MiB), device_error);            // runs into the unmapped part
  EXPECT_THROW(dev.mem_unmap(va + 6 * MiB, 2 * MiB), device_error);  // nothing mapped
  EXPECT_THROW(dev.mem_unmap(va, 0), device_error);
  EXPECT_THROW(dev.set_access(va, 2 * MiB), device_error);
  EXPECT_THROW(dev.set_access(va + 4 * MiB, 4 * MiB), device_error);
  try {
    dev.set_access(va + 6 * MiB, 2 * MiB);
    FAIL();
  } catch (const device_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("set_access(va=0x"));
    EXPECT_THAT(e.what(), HasSubstr("nothing is mapped"));
  }
  EXPECT_EQ(dev.calls().calls(device_call::mem_unmap), 0u);
  EXPECT_EQ(dev.calls().calls(device_call::set_access), 0u);
  dev.set_access(va, 6 * MiB);
  dev.mem_unmap(va, 6 * MiB);  // both mappings in one call
  EXPECT_EQ(dev.calls().calls(device_call::mem_unmap), 1u);
  dev.validate();
}

TEST(sim_device_vmm, address_free_needs_the_whole_empty_reservation) {
  sim_device dev;
  const device_ptr va = dev.address_reserve(4 * MiB);
  const phys_handle h = dev.mem_create(2 * MiB);
  dev.mem_map(va, 2 * MiB, h);
  EXPECT_THROW(dev.address_free(va, 4 * MiB), device_error);            // still mapped
  EXPECT_THROW(dev.address_free(va, 2 * MiB), device_error);            // not the whole reservation
  EXPECT_THROW(dev.address_free(va + 2 * MiB, 2 * MiB), device_error);  // not its start
  dev.mem_unmap(va, 2 * MiB);
  dev.address_free(va, 4 * MiB);
  EXPECT_THROW(dev.address_free(va, 4 * MiB), device_error);  // already freed
  EXPECT_THROW(dev.mem_map(va, 2 * MiB, h), device_error);    // no reservation any more
  dev.validate();
}

TEST(sim_device_vmm, released_handle_keeps_its_memory_while_mapped) {
  sim_device dev;
  const device_ptr va = dev.address_reserve(2 * MiB);
  const phys_handle h = dev.mem_create(2 * MiB);
  dev.mem_map(va, 2 * MiB, h);
  dev.mem_release(h);
  EXPECT_EQ(dev.used_bytes(), 2 * MiB);
  EXPECT_THROW(dev.mem_release(h), device_error);  // a second release
  dev.validate();
  dev.mem_unmap(va, 2 * MiB);
  EXPECT_EQ(dev.used_bytes(), 0u);
  EXPECT_THROW(dev.mem_release(h), device_error);  // gone
  dev.address_free(va, 2 * MiB);
  dev.validate();
}

// ---- costs --------------------------------------------------------------------------------------------

TEST(sim_device_costs, legacy_calls_cost_the_h200_figures) {
  sim_device dev;
  const device_ptr p = dev.legacy_malloc(4 * KiB);  // a measured point: 41.7 us
  EXPECT_EQ(ns_of(dev, device_call::legacy_malloc), 41'700u);
  dev.legacy_free(p);  // 35.6 us
  EXPECT_EQ(ns_of(dev, device_call::legacy_free), 35'600u);
  // 1 KiB: log2 = 10, halfway between 256 B (42.1) and 4 KiB (41.7): 41.9 us.
  dev.reset_calls();
  dev.legacy_free(dev.legacy_malloc(1 * KiB));
  EXPECT_EQ(ns_of(dev, device_call::legacy_malloc), 41'900u);
  // 3 MiB: log2(3 MiB) - 21 = log2(1.5) = 0.58496; over 2 log2 units from 2 MiB (42.3) to 8 MiB (41.4):
  // 42300 - 0.29248 * 900 = 42036.77 -> 42037 ns. Its free is of 4 MiB: 36300 + 0.5 * 2800 = 37700 ns.
  dev.reset_calls();
  dev.legacy_free(dev.legacy_malloc(3 * MiB));
  EXPECT_EQ(ns_of(dev, device_call::legacy_malloc), 42'037u);
  EXPECT_EQ(ns_of(dev, device_call::legacy_free), 37'700u);
  // Beyond the measured sizes the cost is held: 16 B as 256 B, 2 GiB as 1 GiB. A free costs by the block:
  // the 16 B block is 512 B, log2 9, a quarter of the way from 256 B (35.5) to 4 KiB (35.6): 35.525 us.
  dev.reset_calls();
  dev.legacy_free(dev.legacy_malloc(16));
  dev.legacy_free(dev.legacy_malloc(2 * GiB));
  EXPECT_EQ(ns_of(dev, device_call::legacy_malloc), 42'100u + 177'300u);
  EXPECT_EQ(ns_of(dev, device_call::legacy_free), 35'525u + 579'300u);
}

TEST(sim_device_costs, range_calls_cost_per_handle) {
  sim_device dev;
  const device_ptr va = dev.address_reserve(8 * MiB);  // 0.65 us (8 MiB: 0.5-0.8)
  phys_handle h[3];
  for (int i = 0; i < 3; ++i) {
    h[i] = dev.mem_create(2 * MiB);                   // 8.5 us each (7-10)
    dev.mem_map(va + i * 2 * MiB, 2 * MiB, h[i]);     // 0.7 us each (0.5-0.9)
  }
  dev.set_access(va, 6 * MiB);  // 3 x 22 us (19-25)
  dev.mem_unmap(va, 6 * MiB);   // 3 x 15 us (13-17)
  for (auto x : h) dev.mem_release(x);  // 10.5 us each (9-12)
  dev.address_free(va, 8 * MiB);        // 0.6 us (0.4-0.8)
  EXPECT_EQ(ns_of(dev, device_call::address_reserve), 650u);
  EXPECT_EQ(ns_of(dev, device_call::mem_create), 3 * 8'500u);
  EXPECT_EQ(ns_of(dev, device_call::mem_map), 3 * 700u);
  EXPECT_EQ(ns_of(dev, device_call::set_access), 66'000u);
  EXPECT_EQ(dev.calls().calls(device_call::set_access), 1u);
  EXPECT_EQ(ns_of(dev, device_call::mem_unmap), 45'000u);
  EXPECT_EQ(dev.calls().calls(device_call::mem_unmap), 1u);
  EXPECT_EQ(ns_of(dev, device_call::mem_release), 3 * 10'500u);
  EXPECT_EQ(ns_of(dev, device_call::address_free), 600u);
  // One 1 GiB handle: cuMemSetAccess 57-58 -> 57.5 us.
  const device_ptr big = dev.address_reserve(1 * GiB);
  dev.mem_map(big, 1 * GiB, dev.mem_create(1 * GiB));
  dev.reset_calls();
  dev.set_access(big, 1 * GiB);
  EXPECT_EQ(ns_of(dev, device_call::set_access), 57'500u);
}

TEST(sim_device_costs, assumed_costs_of_unmeasured_calls) {
  sim_device dev;
  const event_id e = dev.event_create();
  dev.event_record(e, 0);
  dev.event_query(e);
  dev.event_synchronize(e);
  dev.stream_synchronize(0);
  dev.device_synchronize();
  dev.mem_info();
  // 2 + 0.5 + 1 + 1 + 5 + 1 = 10.5 us
  EXPECT_EQ(dev.calls().total_nanoseconds(), 10'500u);
  EXPECT_EQ(dev.calls().total_calls(), 6u);
}

TEST(sim_device_costs, zero_model_counts_calls_only) {
  sim_device_options o;
  o.costs = cost_model::zero();
  sim_device dev(o);
  dev.legacy_free(dev.legacy_malloc(1 * GiB));
  dev.mem_info();
  EXPECT_EQ(dev.calls().total_calls(), 3u);
  EXPECT_EQ(dev.calls().total_nanoseconds(), 0u);
}

TEST(cost_curve, rejects_unordered_points) {
  EXPECT_THROW(cost_curve({{4096, 1.0}, {256, 2.0}}), usage_error);
  EXPECT_THROW(cost_curve({{0, 1.0}}), usage_error);
  EXPECT_EQ(cost_curve{}.at(1 * MiB), 0u);
}

TEST(cost_curve, scaled_multiplies_every_point_and_what_lies_between) {
  const cost_curve c({{2 * MiB, 1000.0}, {8 * MiB, 3000.0}});
  const cost_curve twice = c.scaled(2.0);
  EXPECT_EQ(twice.at(2 * MiB), 2000u);
  EXPECT_EQ(twice.at(4 * MiB), 4000u);  // halfway in log2: 2000 ns, doubled
  EXPECT_EQ(twice.at(64 * MiB), 6000u);
  EXPECT_EQ(c.scaled(0.0).at(4 * MiB), 0u);
  EXPECT_THROW(c.scaled(-1.0), usage_error);
}

TEST(cost_model, lent_machine_scales_the_measured_kinds_and_keeps_the_rest) {
  const cost_model table = cost_model::h200(), lent = cost_model::h200_lent();
  // 2 MiB handles: cuMemSetAccess 22 us x 1.24, cuMemUnmap 15 x 1.68, cuMemCreate 8.5 x 1.56, cuMemMap 0.7 x 1.85.
  EXPECT_EQ(lent.cost(device_call::set_access, 2 * MiB), 27'280u);
  EXPECT_EQ(lent.cost(device_call::mem_unmap, 2 * MiB), 25'200u);
  EXPECT_EQ(lent.cost(device_call::mem_create, 2 * MiB), 13'260u);
  EXPECT_EQ(lent.cost(device_call::mem_map, 2 * MiB), 1'295u);
  EXPECT_EQ(lent.cost(device_call::legacy_malloc, 256), 63'571u);  // 42.1 x 1.51
  // cudaFree and cuMemRelease were not made in the calibration replays: the table's figures.
  EXPECT_EQ(lent.cost(device_call::legacy_free, 1 * MiB), table.cost(device_call::legacy_free, 1 * MiB));
  EXPECT_EQ(lent.cost(device_call::mem_release, 8 * MiB), table.cost(device_call::mem_release, 8 * MiB));
}

// ---- streams and events -------------------------------------------------------------------------------

TEST(sim_device_streams, unheld_work_completes_at_once) {
  sim_device dev;
  const event_id e = dev.event_create();
  EXPECT_TRUE(dev.event_query(e));  // never recorded: complete, as in CUDA
  dev.event_record(e, 7);
  EXPECT_TRUE(dev.event_query(e));
}

TEST(sim_device_streams, hold_keeps_later_events_incomplete_until_release) {
  sim_device dev;
  const event_id before = dev.event_create();
  const event_id after = dev.event_create();
  const event_id elsewhere = dev.event_create();
  dev.event_record(before, 1);
  dev.hold(1);
  dev.event_record(after, 1);
  dev.event_record(elsewhere, 2);
  EXPECT_TRUE(dev.event_query(before));
  EXPECT_FALSE(dev.event_query(after));
  EXPECT_TRUE(dev.event_query(elsewhere));
  dev.release(1);
  EXPECT_TRUE(dev.event_query(after));
  dev.validate();
}

TEST(sim_device_streams, synchronizing_completes_what_it_waits_for) {
  sim_device dev;
  const event_id first = dev.event_create();
  const event_id second = dev.event_create();
  dev.hold(1);
  dev.event_record(first, 1);
  dev.event_record(second, 1);
  dev.event_synchronize(first);
  EXPECT_TRUE(dev.event_query(first));
  EXPECT_FALSE(dev.event_query(second));  // recorded after the point waited for
  dev.stream_synchronize(1);
  EXPECT_TRUE(dev.event_query(second));
  const event_id third = dev.event_create();
  dev.event_record(third, 1);  // the stream is still held
  EXPECT_FALSE(dev.event_query(third));
  dev.hold(2);
  const event_id fourth = dev.event_create();
  dev.event_record(fourth, 2);
  dev.device_synchronize();
  EXPECT_TRUE(dev.event_query(third));
  EXPECT_TRUE(dev.event_query(fourth));
  dev.validate();
}

TEST(sim_device_streams, legacy_free_waits_for_the_device) {
  sim_device dev;
  const device_ptr p = dev.legacy_malloc(4 * KiB);
  const event_id e = dev.event_create();
  dev.hold(3);
  dev.event_record(e, 3);
  EXPECT_FALSE(dev.event_query(e));
  dev.legacy_free(p);  // cudaFree synchronizes the device
  EXPECT_TRUE(dev.event_query(e));
}

TEST(sim_device_streams, with_a_lag_work_completes_that_long_after_it_was_queued) {
  sim_device_options o;
  o.lag_ns = 5'000'000;
  sim_device dev(o);
  const event_id a = dev.event_create();
  const event_id b = dev.event_create();
  dev.set_time(1'000'000);
  dev.event_record(a, 1);  // done at 6 ms
  dev.set_time(3'000'000);
  dev.event_record(b, 1);  // done at 8 ms
  EXPECT_FALSE(dev.event_query(a));
  dev.validate();
  dev.set_time(5'999'999);
  EXPECT_FALSE(dev.event_query(a));
  dev.set_time(6'000'000);
  EXPECT_TRUE(dev.event_query(a));
  EXPECT_FALSE(dev.event_query(b));
  dev.validate();
  dev.set_time(8'000'000);
  EXPECT_TRUE(dev.event_query(b));
  dev.validate();
}

TEST(sim_device_streams, with_a_lag_synchronizing_holding_and_waiting_still_rule) {
  sim_device_options o;
  o.lag_ns = 5'000'000;
  sim_device dev(o);
  const event_id a = dev.event_create();
  const event_id b = dev.event_create();
  const event_id c = dev.event_create();
  const event_id d = dev.event_create();
  const event_id e = dev.event_create();
  dev.event_record(a, 1);
  dev.stream_synchronize(1);  // waits for the device: done although its time has not come
  EXPECT_TRUE(dev.event_query(a));
  dev.event_record(b, 2);  // done at 5 ms, but the stream is held from now on
  dev.hold(2);
  dev.set_time(10'000'000);
  EXPECT_FALSE(dev.event_query(b));
  dev.release(2);
  EXPECT_TRUE(dev.event_query(b));
  dev.event_record(c, 3);  // done at 15 ms
  dev.device_synchronize();
  EXPECT_TRUE(dev.event_query(c));
  dev.hold(3);
  dev.event_record(d, 3);  // held: done only at release
  dev.stream_wait_event(4, d);
  dev.event_record(e, 4);  // its own time comes at 15 ms; it also waits for d
  dev.set_time(15'000'000);
  EXPECT_FALSE(dev.event_query(e));
  dev.validate();
  dev.release(3);
  EXPECT_TRUE(dev.event_query(d));
  EXPECT_TRUE(dev.event_query(e));
  dev.validate();
}

TEST(sim_device_streams, unknown_events_throw) {
  sim_device dev;
  const event_id e = dev.event_create();
  dev.event_destroy(e);
  EXPECT_THROW(dev.event_query(e), device_error);
  EXPECT_THROW(dev.event_query(12345), device_error);
  EXPECT_THROW(dev.event_record(e, 0), device_error);
  EXPECT_THROW(dev.event_synchronize(e), device_error);
  EXPECT_THROW(dev.event_destroy(e), device_error);
  EXPECT_EQ(dev.calls().total_calls(), 0u);
}

// ---- the rest -----------------------------------------------------------------------------------------

TEST(sim_device, describes_itself) {
  sim_device dev;
  EXPECT_EQ(dev.name(), "simulated H200 (143771 MiB, 2 MiB granules)");
  EXPECT_TRUE(dev.simulated());
  EXPECT_EQ(dev.granularity(), 2 * MiB);
  const auto info = dev.mem_info();
  EXPECT_EQ(info.total, std::size_t{143771} * MiB);
  EXPECT_EQ(info.free, info.total);
}

TEST(sim_device, rejects_bad_options) {
  sim_device_options o;
  o.granularity = 3 * MiB;
  EXPECT_THROW(sim_device{o}, usage_error);
  o = {};
  o.capacity = 0;
  EXPECT_THROW(sim_device{o}, usage_error);
}

}  // namespace
}  // namespace vram

namespace vram {
namespace {

// Several simulated devices never hand out the same address, as no two GPUs of a process do: device N's
// addresses lie in [N << 48, (N + 1) << 48).
TEST(SimDeviceIndex, EachSimulatedDeviceHasItsOwnAddresses) {
  sim_device_options o0, o1;
  o0.costs = o1.costs = cost_model::zero();
  o1.index = 1;
  sim_device d0(o0), d1(o1);
  const device_ptr a = d0.legacy_malloc(4096), b = d1.legacy_malloc(4096);
  EXPECT_EQ(a >> 48, 0u);
  EXPECT_EQ(b >> 48, 1u);
  EXPECT_EQ(b - a, device_ptr{1} << 48);  // the same place in each window
  const device_ptr va = d1.address_reserve(2 * MiB);
  EXPECT_EQ(va >> 48, 1u);
  EXPECT_THROW(d0.legacy_free(b), device_error);  // device 0 never handed out b
  d0.legacy_free(a);
  d1.legacy_free(b);
  d1.address_free(va, 2 * MiB);
  d0.validate();
  d1.validate();
}

}  // namespace
}  // namespace vram
