// torch-expandable: PyTorch's caching allocator with expandable_segments:True. One segment per (stream, pool)
// reserves 9/8 of the device and maps pages as needed: 2 MiB for the small pool, 20 MiB for the large one.
// Answers worked out by hand from PyTorch's rules; sizes in MiB.
#include <gtest/gtest.h>

#include "vram/core/error.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/emulation/torch_caching_resource.hpp"
#include "vram/emulation/torch_expandable_resource.hpp"

namespace vram {
namespace {

sim_device_options device_of(std::size_t capacity = std::size_t{143771} * MiB) {
  sim_device_options o;
  o.capacity = capacity;
  o.costs = cost_model::zero();
  return o;
}

torch_caching_resource make(device& dev, const policy_options& options = {}) {
  return torch_caching_resource(dev, torch_allocator_config::parse(options, true));
}

std::uint64_t calls(const sim_device& dev, device_call c) { return dev.calls().calls(c); }

TEST(TorchExpandable, FactoryNamesThePolicy) {
  sim_device dev(device_of());
  EXPECT_EQ(make_torch_expandable_resource(dev, {})->name(), "torch-expandable");
  EXPECT_THROW(make_torch_expandable_resource(dev, {{"expandable", "1"}}), usage_error);
}

TEST(TorchExpandable, SmallPoolMapsTwoMiBPages) {
  sim_device dev(device_of());
  auto r = make(dev);
  const device_ptr a = r.allocate(512);
  EXPECT_EQ(r.reserved_bytes(), 2 * MiB);  // one 2 MiB page
  EXPECT_EQ(calls(dev, device_call::address_reserve), 1u);
  EXPECT_EQ(calls(dev, device_call::mem_create), 1u);
  EXPECT_EQ(calls(dev, device_call::mem_map), 1u);
  EXPECT_EQ(calls(dev, device_call::set_access), 1u);
  EXPECT_EQ(calls(dev, device_call::legacy_malloc), 0u);
  const device_ptr b = r.allocate(1 * MiB);  // the rest of the page: 2 MiB - 512 >= 1 MiB
  EXPECT_EQ(b, a + 512);
  EXPECT_EQ(r.reserved_bytes(), 2 * MiB);
  r.validate();
}

TEST(TorchExpandable, LargePoolMapsTwentyMiBPagesAndSplitsAnyRemainder) {
  sim_device dev(device_of());
  auto r = make(dev);
  r.allocate(1 * MiB + 1);                    // 1 MiB + 512 in the large pool: one 20 MiB page
  EXPECT_EQ(r.reserved_bytes(), 20 * MiB);
  EXPECT_EQ(r.allocated_bytes(), 1 * MiB + 512);  // expandable blocks split whenever >= 512 B remain
  r.allocate(30 * MiB);  // 19 MiB - 512 free at the end, then unmapped: map one more page, 40 MiB in all
  EXPECT_EQ(r.reserved_bytes(), 40 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 2u);
  r.validate();
}

TEST(TorchExpandable, GrowsAtTheEndAndUnmapsFreePagesOnEmptyCache) {
  sim_device dev(device_of());
  auto r = make(dev);
  const device_ptr a = r.allocate(12 * MiB);  // page 0: a = [0, 12), free [12, 20)
  const device_ptr b = r.allocate(12 * MiB);  // 8 MiB free + map page 1: b = [12, 24), free [24, 40)
  EXPECT_EQ(b, a + 12 * MiB);
  EXPECT_EQ(r.reserved_bytes(), 40 * MiB);
  EXPECT_EQ(calls(dev, device_call::address_reserve), 1u);  // still the one segment

  r.deallocate(b, 12 * MiB);  // free [12, 40)
  r.release_cached();         // page 1 = [20, 40) is wholly free: unmapped; [12, 20) stays cached
  EXPECT_EQ(r.reserved_bytes(), 20 * MiB);
  EXPECT_EQ(r.free_memory().total, 8 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 1u);
  EXPECT_EQ(calls(dev, device_call::stream_synchronize), 1u);  // unmapping waits for the stream first
  r.validate();

  r.deallocate(a, 12 * MiB);
  r.release_cached();  // everything unmapped: the segment goes and its address range is freed
  EXPECT_EQ(r.reserved_bytes(), 0u);
  EXPECT_EQ(calls(dev, device_call::mem_release), 2u);
  EXPECT_EQ(calls(dev, device_call::address_free), 1u);
  EXPECT_EQ(r.stats().segments, 0u);
  r.validate();
}

TEST(TorchExpandable, UnmappedGapsAreRefilledAtTheLowestAddress) {
  sim_device dev(device_of());
  auto r = make(dev);
  const device_ptr a = r.allocate(20 * MiB);  // page 0
  const device_ptr b = r.allocate(20 * MiB);  // page 1
  const device_ptr c = r.allocate(20 * MiB);  // page 2
  r.deallocate(b, 20 * MiB);
  r.release_cached();  // page 1 unmapped: a gap between a and c
  EXPECT_EQ(r.reserved_bytes(), 40 * MiB);
  const device_ptr d = r.allocate(20 * MiB);  // the gap is the lowest address with room
  EXPECT_EQ(d, b);
  EXPECT_EQ(r.reserved_bytes(), 60 * MiB);
  r.deallocate(a, 20 * MiB);
  r.deallocate(c, 20 * MiB);
  r.deallocate(d, 20 * MiB);
  r.validate();
}

TEST(TorchExpandable, BestFitCountsWhatABlockCouldGrowTo) {
  sim_device dev(device_of());
  auto r = make(dev);
  const device_ptr p1 = r.allocate(12 * MiB);  // page 0: p1 = [0, 12), free [12, 20)
  const device_ptr p2 = r.allocate(4 * MiB);   // p2 = [12, 16), free [16, 20)
  const device_ptr p3 = r.allocate(16 * MiB);  // free 4 MiB + page 1: p3 = [16, 32), free T = [32, 40)
  EXPECT_EQ(p3, p1 + 16 * MiB);
  r.deallocate(p1, 12 * MiB);  // free M = [0, 12), walled in by p2
  // 6 MiB: by size T (8 MiB) fits first, but T could grow into the unmapped rest of the segment, so for best
  // fit it counts as that large; M (12 MiB, cannot grow) is smaller by that measure and is taken.
  EXPECT_EQ(r.allocate(6 * MiB), p1);
  EXPECT_EQ(r.reserved_bytes(), 40 * MiB);
  r.deallocate(p2, 4 * MiB);
  r.validate();
}

TEST(TorchExpandable, EachStreamAndPoolHasItsOwnSegment) {
  sim_device dev(device_of());
  auto r = make(dev);
  r.allocate(12 * MiB, 1);
  r.allocate(12 * MiB, 2);
  r.allocate(1000, 1);
  EXPECT_EQ(calls(dev, device_call::address_reserve), 3u);  // large/1, large/2, small/1
  EXPECT_EQ(r.reserved_bytes(), 20 * MiB + 20 * MiB + 2 * MiB);
  EXPECT_EQ(r.stats().segments, 3u);
  r.validate();
}

TEST(TorchExpandable, RefusedPageUnmapsOtherStreamsFreePagesAndRetries) {
  sim_device dev(device_of(64 * MiB));
  auto r = make(dev);
  const device_ptr a = r.allocate(30 * MiB, 1);  // stream 1 maps 2 pages: 40 MiB
  r.deallocate(a, 30 * MiB, 1);
  // Stream 2 needs its own 40 MiB: 40 + 40 > 64, refused; empty the cache (stream 1's pages are free, so they
  // are unmapped and its segment dropped) and retry.
  EXPECT_NE(r.allocate(30 * MiB, 2), 0u);
  EXPECT_EQ(r.reserved_bytes(), 40 * MiB);
  EXPECT_EQ(r.stats().num_alloc_retries, 1u);
  EXPECT_EQ(r.stats().segments, 1u);
  // 31 MiB: the 10 MiB free at the end plus two more 20 MiB pages; 40 + 40 > 64, and no page is wholly free.
  EXPECT_EQ(r.try_allocate(31 * MiB, 2), 0u);
  EXPECT_EQ(r.reserved_bytes(), 40 * MiB);
  r.validate();
}

TEST(TorchExpandable, BadFreesThrowAndChangeNothing) {
  sim_device dev(device_of());
  auto r = make(dev);
  const device_ptr a = r.allocate(12 * MiB);
  EXPECT_THROW(r.deallocate(a + 512, 12 * MiB), usage_error);
  EXPECT_THROW(r.deallocate(a, 11 * MiB), usage_error);
  EXPECT_EQ(r.allocated_bytes(), 12 * MiB);
  r.deallocate(a, 12 * MiB);
  EXPECT_THROW(r.deallocate(a, 12 * MiB), usage_error);
  r.validate();
}

}  // namespace
}  // namespace vram
