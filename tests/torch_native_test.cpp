// torch-native: PyTorch's caching allocator with cudaMalloc segments, checked against answers worked out by
// hand from PyTorch's rules (c10/cuda/CUDACachingAllocator.cpp). Sizes in MiB unless said otherwise.
#include <gtest/gtest.h>

#include "vram/core/error.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/emulation/torch_caching_resource.hpp"
#include "vram/policies/registry.hpp"

namespace vram {
namespace {

sim_device_options device_of(std::size_t capacity = std::size_t{143771} * MiB) {
  sim_device_options o;
  o.capacity = capacity;
  o.costs = cost_model::zero();
  return o;
}

torch_caching_resource make(device& dev, const policy_options& options = {}) {
  return torch_caching_resource(dev, torch_allocator_config::parse(options, false));
}

TEST(TorchNative, RoundsToMultiplesOf512) {
  const torch_allocator_config c;
  EXPECT_EQ(c.round_size(1), 512u);     // below 512: 512
  EXPECT_EQ(c.round_size(512), 512u);
  EXPECT_EQ(c.round_size(513), 1024u);  // next multiple of 512
  EXPECT_EQ(c.round_size(10 * MiB + 1), 10 * MiB + 512);

  sim_device dev(device_of());
  auto r = make(dev);
  const device_ptr a = r.allocate(1);
  EXPECT_EQ(r.allocated_bytes(), 512u);
  const device_ptr b = r.allocate(513);
  EXPECT_EQ(r.allocated_bytes(), 512u + 1024u);
  EXPECT_EQ(b, a + 512);                   // split off the same 2 MiB small segment, right after a
  EXPECT_EQ(r.reserved_bytes(), 2 * MiB);  // one small segment for both
  r.validate();
}

TEST(TorchNative, SegmentSizeFollowsThePool) {
  struct row {
    std::size_t request, segment;
  };
  const row rows[] = {
      {1 * MiB, 2 * MiB},             // <= 1 MiB: small pool, 2 MiB segment
      {1 * MiB + 1, 20 * MiB},        // rounds to 1 MiB + 512: large pool, < 10 MiB: a 20 MiB segment
      {10 * MiB, 10 * MiB},           // >= 10 MiB: the request rounded up to 2 MiB
      {10 * MiB + 1, 12 * MiB},       // 10 MiB + 512 rounded up to 2 MiB
  };
  for (const row& x : rows) {
    sim_device dev(device_of());
    auto r = make(dev);
    r.allocate(x.request);
    EXPECT_EQ(r.reserved_bytes(), x.segment) << "request " << x.request;
    EXPECT_EQ(dev.calls().calls(device_call::legacy_malloc), 1u);
  }
}

TEST(TorchNative, SmallPoolSplitsWhenAtLeast512BytesRemain) {
  sim_device dev(device_of());
  auto r = make(dev);
  const device_ptr a = r.allocate(1 * MiB);          // 2 MiB segment: 1 MiB left, split
  const device_ptr b = r.allocate(1 * MiB - 512);    // from the rest: 512 B left, still split (>= 512)
  const device_ptr c = r.allocate(512);              // takes exactly those 512 B
  EXPECT_EQ(b, a + 1 * MiB);
  EXPECT_EQ(c, a + 2 * MiB - 512);
  EXPECT_EQ(r.reserved_bytes(), 2 * MiB);
  EXPECT_EQ(r.free_memory().total, 0u);
  r.validate();
}

TEST(TorchNative, LargePoolSplitsOnlyWhenMoreThan1MiBRemains) {
  {
    sim_device dev(device_of());
    auto r = make(dev);
    r.allocate(19 * MiB);  // segment 20 MiB; 1 MiB would remain, not > 1 MiB: the block keeps all 20 MiB
    EXPECT_EQ(r.allocated_bytes(), 20 * MiB);
    EXPECT_EQ(r.free_memory().total, 0u);
  }
  {
    sim_device dev(device_of());
    auto r = make(dev);
    const device_ptr a = r.allocate(19 * MiB - 512);  // 1 MiB + 512 remains (> 1 MiB): split
    EXPECT_EQ(r.allocated_bytes(), 19 * MiB - 512);
    EXPECT_EQ(r.free_memory().total, 1 * MiB + 512);
    const device_ptr b = r.allocate(1 * MiB + 1);  // rounds to 1 MiB + 512: the remainder, no new segment
    EXPECT_EQ(b, a + 19 * MiB - 512);
    EXPECT_EQ(r.reserved_bytes(), 20 * MiB);
    r.validate();
  }
}

TEST(TorchNative, BestFitTakesTheSmallestFittingBlockThenTheLowestAddress) {
  sim_device dev(device_of());
  auto r = make(dev);
  const device_ptr a = r.allocate(12 * MiB);
  const device_ptr b = r.allocate(14 * MiB);
  const device_ptr c = r.allocate(16 * MiB);
  r.deallocate(a, 12 * MiB);
  r.deallocate(b, 14 * MiB);
  r.deallocate(c, 16 * MiB);
  // 13 MiB fits the 14 and 16 MiB blocks; the 14 MiB one is smallest. 1 MiB remains: no split.
  EXPECT_EQ(r.allocate(13 * MiB), b);
  EXPECT_EQ(r.allocated_bytes(), 14 * MiB);
  EXPECT_EQ(r.reserved_bytes(), 42 * MiB);  // 12 + 14 + 16, no new segment

  const device_ptr d = r.allocate(12 * MiB);  // takes a, the only 12 MiB block
  EXPECT_EQ(d, a);
  const device_ptr e = r.allocate(12 * MiB);  // nothing fits but c (16 MiB, 4 MiB remains > 1 MiB): split c
  EXPECT_EQ(e, c);
  r.deallocate(d, 12 * MiB);
  r.deallocate(e, 12 * MiB);  // c merges back whole
  const device_ptr f = r.allocate(12 * MiB);  // 12 MiB (a) beats 16 MiB (c)
  EXPECT_EQ(f, a);
  r.validate();
}

TEST(TorchNative, FreeMergesWithFreeNeighbours) {
  sim_device dev(device_of());
  auto r = make(dev);
  const device_ptr a = r.allocate(4 * MiB);  // one 20 MiB segment: a | b | c | 8 MiB free
  const device_ptr b = r.allocate(4 * MiB);
  const device_ptr c = r.allocate(4 * MiB);
  EXPECT_EQ(b, a + 4 * MiB);
  EXPECT_EQ(c, a + 8 * MiB);
  EXPECT_EQ(r.reserved_bytes(), 20 * MiB);

  r.deallocate(b, 4 * MiB);  // free: b (4) and the tail (8), not adjacent
  EXPECT_EQ(r.free_memory().total, 12 * MiB);
  EXPECT_EQ(r.free_memory().largest, 8 * MiB);
  r.deallocate(a, 4 * MiB);  // a merges with b: 8 + 8
  EXPECT_EQ(r.free_memory().total, 16 * MiB);
  EXPECT_EQ(r.free_memory().largest, 8 * MiB);
  r.deallocate(c, 4 * MiB);  // c joins both sides: the whole 20 MiB segment again
  EXPECT_EQ(r.free_memory().largest, 20 * MiB);
  r.validate();

  r.release_cached();  // empty_cache: the unsplit segment goes back
  EXPECT_EQ(r.reserved_bytes(), 0u);
  EXPECT_EQ(dev.calls().calls(device_call::legacy_free), 1u);
}

TEST(TorchNative, EmptyCacheKeepsSegmentsThatAreStillSplit) {
  sim_device dev(device_of());
  auto r = make(dev);
  const device_ptr a = r.allocate(4 * MiB);  // 20 MiB segment, split
  const device_ptr b = r.allocate(30 * MiB);
  r.deallocate(b, 30 * MiB);
  r.release_cached();  // b's 30 MiB segment is unsplit and goes; a's segment holds a live block and stays
  EXPECT_EQ(r.reserved_bytes(), 20 * MiB);
  EXPECT_EQ(r.free_memory().total, 16 * MiB);
  r.deallocate(a, 4 * MiB);
  r.validate();
}

TEST(TorchNative, OversizeBlocksServeOnlyOversizeRequests) {
  sim_device dev(device_of());
  auto r = make(dev, {{"max_split_size_mb", "40"}});
  const device_ptr big = r.allocate(50 * MiB);
  r.deallocate(big, 50 * MiB);
  // 30 MiB < max_split (40 MiB) may not take the 50 MiB block (>= 40 MiB): a new 30 MiB segment.
  const device_ptr small = r.allocate(30 * MiB);
  EXPECT_NE(small, big);
  EXPECT_EQ(r.reserved_bytes(), 80 * MiB);
  // 45 MiB >= max_split may take it, as 50 < 45 + 20 (max_non_split_rounding); oversize blocks never split.
  EXPECT_EQ(r.allocate(45 * MiB), big);
  EXPECT_EQ(r.allocated_bytes(), 30 * MiB + 50 * MiB);
  r.validate();
}

TEST(TorchNative, OversizeBlocksAreRoundedUpOnlyWithinALimit) {
  for (const char* rounding : {"", "30"}) {
    sim_device dev(device_of());
    policy_options o{{"max_split_size_mb", "40"}};
    if (*rounding != 0) o["max_non_split_rounding_mb"] = rounding;
    auto r = make(dev, o);
    const device_ptr big = r.allocate(70 * MiB);
    r.deallocate(big, 70 * MiB);
    const device_ptr p = r.allocate(45 * MiB);
    if (*rounding == 0) {
      // 70 >= 45 + 20: too wasteful; a new segment of 46 MiB (45 rounded up to 2 MiB).
      EXPECT_NE(p, big);
      EXPECT_EQ(r.reserved_bytes(), 116 * MiB);
    } else {
      // 70 < 45 + 30: the cached block serves it whole.
      EXPECT_EQ(p, big);
      EXPECT_EQ(r.reserved_bytes(), 70 * MiB);
    }
  }
}

TEST(TorchNative, RefusedSegmentFreesUnsplitCachedBlocksAndRetries) {
  sim_device dev(device_of(64 * MiB));
  auto r = make(dev);
  const device_ptr a = r.allocate(30 * MiB);
  r.deallocate(a, 30 * MiB);  // 30 MiB cached
  // 40 MiB: nothing cached fits; 30 + 40 > 64 so the device refuses; max_split is unset so no oversize
  // release; empty the cache (frees the 30 MiB segment) and retry: 40 MiB fits.
  const device_ptr b = r.allocate(40 * MiB);
  EXPECT_NE(b, 0u);
  EXPECT_EQ(r.reserved_bytes(), 40 * MiB);
  EXPECT_EQ(r.stats().num_alloc_retries, 1u);
  EXPECT_EQ(dev.calls().calls(device_call::legacy_free), 1u);

  // 30 MiB more: 40 + 30 > 64 and nothing is cached: out of memory, after the same retry.
  EXPECT_EQ(r.try_allocate(30 * MiB), 0u);
  EXPECT_THROW(r.allocate(30 * MiB), out_of_memory);
  EXPECT_EQ(r.stats().num_ooms, 2u);
  EXPECT_EQ(r.reserved_bytes(), 40 * MiB);
  r.validate();
  // The same as named counters (replay's allocator_counters). Each of the three refused requests emptied
  // the cache, synchronizing every stream, and retried; the two that failed after it are the OOMs. Two
  // segments were taken (30 and 40 MiB), one returned, one held.
  using counters = std::vector<std::pair<std::string, std::uint64_t>>;
  EXPECT_EQ(r.counters(), (counters{{"segments", 1},
                                    {"num_device_alloc", 2},
                                    {"num_device_free", 1},
                                    {"num_alloc_retries", 3},
                                    {"num_ooms", 2},
                                    {"num_sync_all_streams", 3}}));
}

TEST(TorchNative, RefusedSegmentFirstFreesJustEnoughOversizeBlocks) {
  sim_device dev(device_of(64 * MiB));
  auto r = make(dev, {{"max_split_size_mb", "20"}});
  const device_ptr a = r.allocate(24 * MiB);
  const device_ptr b = r.allocate(22 * MiB);
  const device_ptr s = r.allocate(1 * MiB);  // a 2 MiB small segment
  r.deallocate(a, 24 * MiB);
  r.deallocate(b, 22 * MiB);
  r.deallocate(s, 1 * MiB);  // held: 24 + 22 + 2 = 48 MiB, all cached
  // 30 MiB: no cached block is large enough; 48 + 30 > 64. No single oversize block covers 30 MiB, so the
  // largest go first: 24 (not enough), then 22 (46 >= 30). The small segment survives; then 2 + 30 fits.
  EXPECT_NE(r.allocate(30 * MiB), 0u);
  EXPECT_EQ(r.reserved_bytes(), 32 * MiB);
  EXPECT_EQ(r.stats().num_alloc_retries, 0u);  // the empty-cache retry was not needed
  EXPECT_EQ(dev.calls().calls(device_call::legacy_free), 2u);
  r.validate();
}

TEST(TorchNative, RefusedSegmentFreesTheSmallestOversizeBlockThatCovers) {
  sim_device dev(device_of(128 * MiB));
  auto r = make(dev, {{"max_split_size_mb", "20"}});
  const device_ptr a = r.allocate(70 * MiB);
  const device_ptr b = r.allocate(24 * MiB);
  r.deallocate(a, 70 * MiB);
  r.deallocate(b, 24 * MiB);
  // 40 MiB: the 70 MiB block exceeds 40 + 20, so it may not serve; 94 + 40 > 128. The smallest cached
  // oversize block >= 40 MiB is the 70 MiB one: only it goes. Then 24 + 40 = 64 MiB.
  EXPECT_NE(r.allocate(40 * MiB), 0u);
  EXPECT_EQ(r.reserved_bytes(), 64 * MiB);
  EXPECT_EQ(r.free_memory().total, 24 * MiB);
  r.validate();
}

TEST(TorchNative, MemoryFractionCapsReservedBytes) {
  sim_device dev(device_of(100 * MiB));
  auto r = make(dev, {{"per_process_memory_fraction", "0.5"}});
  ASSERT_TRUE(r.memory_limit().has_value());
  EXPECT_EQ(*r.memory_limit(), 50 * MiB);
  const device_ptr a = r.allocate(30 * MiB);
  EXPECT_EQ(r.try_allocate(24 * MiB), 0u);  // 30 + 24 > 50, though the device has room
  EXPECT_NE(r.try_allocate(20 * MiB), 0u);  // 30 + 20 = 50
  r.deallocate(a, 30 * MiB);
}

TEST(TorchNative, GarbageCollectionFreesTheOldestCachedBlocks) {
  for (bool gc : {false, true}) {
    sim_device dev(device_of(100 * MiB));
    policy_options o{{"per_process_memory_fraction", "0.5"}};  // limit 50 MiB
    if (gc) o["garbage_collection_threshold"] = "0.5";         // collect above 25 MiB
    auto r = make(dev, o);
    const device_ptr a = r.allocate(12 * MiB);  // search 1
    r.deallocate(a, 12 * MiB);                  // cached at search 1
    const device_ptr b = r.allocate(14 * MiB);  // search 2: a is too small
    r.deallocate(b, 14 * MiB);                  // cached at search 2
    r.allocate(16 * MiB);                       // search 3: nothing fits
    if (gc) {
      // Held 26 MiB > 25 MiB: ages a = 2, b = 1, mean 1.5: a goes (12 MiB >= the 1 MiB over); then 14 + 16.
      EXPECT_EQ(r.reserved_bytes(), 30 * MiB);
      EXPECT_EQ(r.free_memory().total, 14 * MiB);
    } else {
      EXPECT_EQ(r.reserved_bytes(), 42 * MiB);
    }
    r.validate();
  }
}

TEST(TorchNative, StreamsKeepTheirOwnBlocks) {
  sim_device dev(device_of());
  auto r = make(dev);
  const device_ptr a = r.allocate(12 * MiB, 1);
  r.deallocate(a, 12 * MiB, 1);
  const device_ptr b = r.allocate(12 * MiB, 2);  // a is cached for stream 1 only: a new segment
  EXPECT_NE(b, a);
  EXPECT_EQ(r.reserved_bytes(), 24 * MiB);
  EXPECT_EQ(r.allocate(12 * MiB, 1), a);  // stream 1 gets its block back
  EXPECT_EQ(r.reserved_bytes(), 24 * MiB);
  r.validate();
}

TEST(TorchNative, RecordedStreamDelaysReuseUntilItsWorkCompletes) {
  sim_device dev(device_of());
  auto r = make(dev);
  dev.hold(7);
  const device_ptr a = r.allocate(12 * MiB, 1);
  r.record_stream(a, 7);
  r.record_stream(a, 1);  // the allocation stream itself: ignored
  r.deallocate(a, 12 * MiB, 1);
  EXPECT_EQ(dev.calls().calls(device_call::event_record), 1u);  // one event, on stream 7
  EXPECT_EQ(r.free_memory().total, 0u);                          // not cached yet

  const device_ptr b = r.allocate(12 * MiB, 1);  // stream 7 is busy: a may not be reused
  EXPECT_NE(b, a);
  EXPECT_EQ(r.reserved_bytes(), 24 * MiB);
  r.validate();

  dev.release(7);
  const device_ptr c = r.allocate(12 * MiB, 1);  // the event is done: a returns to the pool first
  EXPECT_EQ(c, a);
  EXPECT_EQ(r.reserved_bytes(), 24 * MiB);
  r.validate();
}

TEST(TorchNative, EmptyCacheWaitsForPendingEvents) {
  sim_device dev(device_of());
  auto r = make(dev);
  dev.hold(7);
  const device_ptr a = r.allocate(12 * MiB);
  r.record_stream(a, 7);
  r.deallocate(a, 12 * MiB);
  r.release_cached();  // synchronizes the event, caches a, then frees its unsplit segment
  EXPECT_EQ(r.reserved_bytes(), 0u);
  EXPECT_EQ(r.stats().num_sync_all_streams, 1u);
  r.validate();
}

TEST(TorchNative, BadFreesThrowAndChangeNothing) {
  sim_device dev(device_of());
  auto r = make(dev);
  const device_ptr a = r.allocate(1000);
  EXPECT_THROW(r.deallocate(a + 512, 1000), usage_error);  // not a block start
  EXPECT_THROW(r.deallocate(a, 999), usage_error);         // wrong size
  EXPECT_THROW(r.record_stream(a + 512, 3), usage_error);
  EXPECT_EQ(r.allocated_bytes(), 1024u);
  r.validate();
  r.deallocate(a, 1000);
  EXPECT_THROW(r.deallocate(a, 1000), usage_error);  // double free
  EXPECT_EQ(r.allocated_bytes(), 0u);
  EXPECT_EQ(r.reserved_bytes(), 2 * MiB);
  r.validate();
}

TEST(TorchNative, OptionsAreCheckedAsPyTorchChecksThem) {
  EXPECT_THROW(torch_allocator_config::parse({{"max_split_size", "40"}}, false), usage_error);  // unknown key
  EXPECT_THROW(torch_allocator_config::parse({{"max_split_size_mb", "19"}}, false), usage_error);
  EXPECT_THROW(torch_allocator_config::parse({{"max_split_size_mb", "4x"}}, false), usage_error);
  EXPECT_THROW(torch_allocator_config::parse({{"garbage_collection_threshold", "1"}}, false), usage_error);
  EXPECT_THROW(torch_allocator_config::parse({{"per_process_memory_fraction", "0"}}, false), usage_error);
  EXPECT_THROW(torch_allocator_config::parse({{"roundup_power2_divisions", "3"}}, false), usage_error);
  EXPECT_THROW(torch_allocator_config::parse({{"expandable_segments", "maybe"}}, false), usage_error);
  EXPECT_EQ(torch_allocator_config::parse({{"max_split_size_mb", "20"}}, false).max_split_size, 20 * MiB);
  EXPECT_TRUE(torch_allocator_config::parse({{"expandable_segments", "True"}}, false).expandable_segments);
}

TEST(TorchNative, PowerOfTwoDivisionsRoundLargerSizesCoarser) {
  const auto four = torch_allocator_config::parse({{"roundup_power2_divisions", "4"}}, false);
  // 1 MiB + 1 lies in [1 MiB, 2 MiB), cut in 4 steps of 256 KiB: up to 1.25 MiB.
  EXPECT_EQ(four.round_size(1 * MiB + 1), 1 * MiB + 256 * KiB);
  EXPECT_EQ(four.round_size(2 * MiB), 2 * MiB);  // a power of two stays
  EXPECT_EQ(four.round_size(1200), 1536u);       // 1200 <= 4 * 512: plain 512-byte rounding
  // Per interval: 8 divisions below 4 MiB (the first entry covers the intervals under it), 1 from there on.
  const auto mixed = torch_allocator_config::parse({{"roundup_power2_divisions", "[2:8|>:1]"}}, false);
  EXPECT_EQ(mixed.round_size(3 * MiB + 1), 3 * MiB + 256 * KiB);  // [2 MiB, 4 MiB) in steps of 256 KiB
  EXPECT_EQ(mixed.round_size(1 * MiB + 1), 1 * MiB + 128 * KiB);  // [1 MiB, 2 MiB) in steps of 128 KiB
  EXPECT_EQ(mixed.round_size(5 * MiB + 1), 5 * MiB + 512);        // 1 division: 512-byte rounding
}

}  // namespace
}  // namespace vram

namespace vram {
namespace {

TEST(TorchNativeSpec, TakesPyTorchsOwnSettingSyntax) {
  // As PYTORCH_CUDA_ALLOC_CONF writes it: key:value items separated by commas, after the policy's colon.
  EXPECT_EQ(parse_policy_list("vram,torch-native:expandable_segments:True,max_split_size_mb:128,cub-bins"),
            (std::vector<std::string>{"vram", "torch-native:expandable_segments:True,max_split_size_mb:128",
                                      "cub-bins"}));
  sim_device dev;
  EXPECT_EQ(make_resource("torch-native:expandable_segments:True,max_split_size_mb:128", dev)->name(),
            "torch-expandable");
  EXPECT_EQ(make_resource("torch-native:expandable_segments:False", dev)->name(), "torch-native");
  // vram's own syntax still reads, and the two agree.
  EXPECT_EQ(make_resource("torch-native:expandable_segments=True;max_split_size_mb=128", dev)->name(),
            "torch-expandable");
  // A list inside [...] is one value, in either syntax, alone or in a policy list.
  EXPECT_EQ(parse_policy_list("torch-native:roundup_power2_divisions:[256:4,1024:2,>:1],vram"),
            (std::vector<std::string>{"torch-native:roundup_power2_divisions:[256:4,1024:2,>:1]", "vram"}));
  EXPECT_EQ(make_resource("torch-native:roundup_power2_divisions:[256:4,1024:2,>:1],max_split_size_mb:128", dev)->name(),
            "torch-native");
  EXPECT_EQ(make_resource("torch-native:roundup_power2_divisions=[256:4,>:1];expandable_segments=True", dev)->name(),
            "torch-expandable");
  // An item of neither form, and an unknown name where no spec with settings comes before, are refused.
  EXPECT_THROW(make_resource("torch-native:expandable_segments", dev), usage_error);
  EXPECT_THROW(parse_policy_list("vram,max_split_size_mb:128"), usage_error);
  EXPECT_THROW(make_resource("torch-native:max_split_size_mb:1", dev), usage_error);  // below PyTorch's 20 MB
}

}  // namespace
}  // namespace vram
