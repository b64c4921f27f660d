// vram's pool on a simulated device: placement, growth at the top, recycling of cold handles, zones,
// thread caches, stream order, limits, trim and bad input, with the answers worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <random>
#include <mutex>
#include <set>
#include <thread>

#include "vram/core/error.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/pool/pool_resource.hpp"
#include "support/live_map.hpp"

namespace vram {
namespace {

// 64 GiB: handles may reach their 64 MiB maximum (a handle is also kept to 1/1024 of the device).
sim_device_options quiet(std::size_t capacity = std::size_t{64} << 30) {
  sim_device_options o;
  o.capacity = capacity;
  o.costs = cost_model::zero();
  return o;
}

pool_options plain(double ratio = 0.05) {
  pool_options o;
  o.thread_cache = false;  // every call goes through the arena, so each step is exact
  o.max_cached_ratio = ratio;
  return o;
}

std::uint64_t calls(const sim_device& d, device_call c) { return d.calls().calls(c); }

TEST(Pool, GrowsAtTheTopInHandlesOverTheBlocksGranules) {
  sim_device dev(quiet());
  pool_resource pool(dev, plain());
  // 3 MiB: its two granules, the partial one with the whole one, mapped as one 4 MiB handle: one call each.
  const device_ptr a = pool.allocate(3 * MiB);
  EXPECT_EQ(pool.reserved_bytes(), 4 * MiB);
  EXPECT_EQ(pool.allocated_bytes(), 3 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 1u);
  EXPECT_EQ(calls(dev, device_call::mem_map), 1u);
  EXPECT_EQ(calls(dev, device_call::set_access), 1u);
  // 1.5 MiB does not fit the 1 MiB left at the top: it extends it, mapping one more 2 MiB handle:
  // the block sits at a + 3 MiB and ends at a + 4.5 MiB.
  const device_ptr b = pool.allocate(3 * MiB / 2);
  EXPECT_EQ(b, a + 3 * MiB);
  EXPECT_EQ(pool.reserved_bytes(), 6 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 2u);
  pool.validate();
  // Freeing a leaves [a, a+3 MiB) and [a+4.5 MiB, a+6 MiB) free: 4.5 MiB, the largest 3 MiB.
  pool.deallocate(a, 3 * MiB);
  const free_space f = pool.free_memory();
  EXPECT_EQ(f.total, 9 * MiB / 2);
  EXPECT_EQ(f.largest, 3 * MiB);
  pool.validate();
}

TEST(Pool, OutsideABurstHandlesAreSmallInABurstLarge) {
  sim_device dev(quiet());
  pool_resource pool(dev, plain());
  // 20 MiB on a roomy device, the first growth within the 10 ms window: 20 MiB is no burst (256 MiB), so
  // handles of at most 8 MiB: 8 + 8 + 4.
  dev.set_time(0);
  const device_ptr a = pool.allocate(20 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 3u);
  // 250 MiB 1 ms later: 270 MiB grown within 10 ms, a burst, so handles of up to 64 MiB: 64 x 3 + 58.
  dev.set_time(1'000'000);
  const device_ptr b = pool.allocate(250 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 3u + 4u);
  EXPECT_EQ(pool.stats().arena.burst_growths, 1u);
  // 20 MiB at 10.5 ms: the first 20 MiB has left the window (10 ms), the 250 MiB has not: 270 MiB, a burst,
  // one 20 MiB handle. 20 MiB more at 21.5 ms, alone in its window: small handles again.
  dev.set_time(10'500'000);
  pool.allocate(20 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 7u + 1u);
  dev.set_time(21'500'000);
  pool.allocate(20 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 8u + 3u);
  EXPECT_EQ(pool.stats().arena.burst_growths, 2u);
  EXPECT_EQ(pool.reserved_bytes(), 310 * MiB);
  pool.deallocate(a, 20 * MiB);
  pool.deallocate(b, 250 * MiB);
  pool.validate();
}

TEST(Pool, PastTheCacheBudgetGrowthRecyclesColdHandles) {
  sim_device dev(quiet());
  pool_resource pool(dev, plain(0.0));
  const device_ptr a = pool.allocate(4 * MiB);      // handle h0 [0,4) MiB
  const device_ptr b = pool.allocate(3 * MiB / 2);  // h1 [4,6); b = [4, 5.5)
  pool.deallocate(a, 4 * MiB);                      // h0 turns cold
  // 4.5 MiB fits no free range ([0,4) and [5.5,6)): it extends the 0.5 MiB at the top, so 4 MiB more is
  // needed. Budget: (1 + 0) x (1.5 + 4.5) MiB = 6 MiB < 6 + 4 MiB, so the cold h0, 4 MiB, is unmapped and
  // mapped again at the top, [6,10): reserved stays 6 MiB, not 10, and nothing is free.
  const device_ptr c = pool.allocate(9 * MiB / 2);
  EXPECT_EQ(c, b + 3 * MiB / 2);
  EXPECT_EQ(pool.reserved_bytes(), 6 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 2u);
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 1u);
  EXPECT_EQ(calls(dev, device_call::mem_map), 3u);
  EXPECT_EQ(pool.free_memory().total, 0u);
  const auto s = pool.stats();
  EXPECT_EQ(s.arena.handles_unmapped, 1u);
  EXPECT_EQ(s.arena.handles_mapped, 3u);
  pool.validate();
}

TEST(Pool, AnUnmapWaitsForAFenceOnTheDeviceNotOnTheHost) {
  // The virtual memory calls do not wait for the device: unmapping memory that a kernel still queued on the
  // freeing stream will touch would fault. The pool records an event on that stream (a fence) and leaves the
  // old address mapped until the fence completes; the host never waits, but in trim().
  sim_device dev(quiet());
  pool_resource pool(dev, plain(0.0));
  const device_ptr a = pool.allocate(4 * MiB, 1);  // as above: h0, h1
  const device_ptr b = pool.allocate(3 * MiB / 2, 1);  // b, which keeps h1 busy to the end
  dev.hold(1);
  const event_id kernel = dev.event_create();
  dev.event_record(kernel, 1);  // work on stream 1 that uses a, still in flight
  pool.deallocate(a, 4 * MiB, 1);  // one stream: a is free at once, for stream 1's later work
  // As above, h0 is recycled to the top, [6, 10): mapped there at once (a handle may be mapped twice), its old
  // view [0, 4) unmapped only once the fence recorded on stream 1 completes. Nothing waits.
  const device_ptr c = pool.allocate(9 * MiB / 2, 1);
  EXPECT_EQ(c, b + 3 * MiB / 2);
  EXPECT_EQ(pool.reserved_bytes(), 6 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 2u);
  EXPECT_EQ(calls(dev, device_call::mem_map), 3u);
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 0u);
  EXPECT_EQ(calls(dev, device_call::event_record), 2u);  // the kernel's, and the fence's
  EXPECT_EQ(calls(dev, device_call::stream_synchronize), 0u);
  EXPECT_EQ(calls(dev, device_call::event_synchronize), 0u);
  EXPECT_FALSE(dev.event_query(kernel));
  EXPECT_EQ(pool.stats().arena.unmaps_deferred, 1u);
  EXPECT_EQ(dev.used_bytes(), 6 * MiB);  // no memory made for it: h0 is mapped twice meanwhile
  pool.validate();
  // Stream 1's work completes; c is freed, h0 turns cold again (b keeps h1), and more work is queued. trim()
  // unmaps h0 behind a second fence, and may wait: it waits for that fence once (which completes the
  // kernel too), unmaps [0, 4) and [6, 10) and releases h0.
  dev.release(1);
  pool.deallocate(c, 9 * MiB / 2, 1);
  dev.hold(1);
  dev.event_record(kernel, 1);
  pool.trim();
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 2u);
  EXPECT_EQ(calls(dev, device_call::event_synchronize), 1u);
  EXPECT_EQ(calls(dev, device_call::stream_synchronize), 0u);
  EXPECT_TRUE(dev.event_query(kernel));
  EXPECT_EQ(calls(dev, device_call::mem_release), 1u);
  EXPECT_EQ(pool.reserved_bytes(), 2 * MiB);
  pool.trim();  // nothing left to unmap: nothing waits
  EXPECT_EQ(calls(dev, device_call::event_synchronize), 1u);
  dev.release(1);
  dev.event_destroy(kernel);
  pool.deallocate(b, 3 * MiB / 2, 1);
  pool.validate();
}

TEST(Pool, OnAnH200SizedDeviceRecyclingBehindQueuedWorkIsDeferredToo) {
  // The GPU test's shape (tests/gpu_test.cpp, GpuUnmapOrder) on the simulated H200: a 24 MiB block (three
  // 8 MiB handles) under a 2 MiB one (a handle of its own at the top), the first freed with its stream held;
  // a 48 MiB block extends the top and, past the budget, recycles the three cold handles below.
  sim_device dev;
  pool_resource pool(dev, plain(0.0));
  const device_ptr p = pool.allocate(24 * MiB, 1);
  const device_ptr keep = pool.allocate(2 * MiB, 1);
  dev.hold(1);
  pool.deallocate(p, 24 * MiB, 1);
  const device_ptr q = pool.allocate(48 * MiB, 1);
  EXPECT_EQ(q, keep + 2 * MiB);
  EXPECT_EQ(pool.stats().arena.unmaps_deferred, 3u);
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 0u);
  EXPECT_EQ(calls(dev, device_call::stream_synchronize) + calls(dev, device_call::event_synchronize), 0u);
  pool.validate();
  dev.release(1);
  pool.deallocate(q, 48 * MiB, 1);
  pool.deallocate(keep, 2 * MiB, 1);
  pool.trim();
  EXPECT_EQ(pool.reserved_bytes(), 0u);
  EXPECT_EQ(dev.used_bytes(), 0u);
}

TEST(Pool, AFenceThatCompletedLetsTheNextGrowthUnmapAtOnce) {
  // As above, but stream 1 is released before the next growth: the growth finds the fence done and unmaps
  // the old view then, and the address range is a gap again.
  sim_device dev(quiet());
  pool_resource pool(dev, plain(0.0));
  const device_ptr a = pool.allocate(4 * MiB, 1);
  pool.allocate(3 * MiB / 2, 1);
  dev.hold(1);
  pool.deallocate(a, 4 * MiB, 1);
  pool.allocate(9 * MiB / 2, 1);  // h0 recycled to [6, 10); [0, 4) waits for its fence
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 0u);
  dev.release(1);
  // 8 MiB fits no free range: growth, which first unmaps [0, 4); nothing waits.
  pool.allocate(8 * MiB, 1);
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 1u);
  EXPECT_EQ(calls(dev, device_call::stream_synchronize) + calls(dev, device_call::event_synchronize), 0u);
  pool.validate();
}

TEST(Pool, OnADeviceBehindTheHostAnUnmapWaitsUntilTheDevicesTimeHasCome) {
  // As above, with no stream held: the device runs 5 ms behind the host (sim_device_options::lag_ns), as a
  // GPU does behind the kernels queued ahead of it. The fence recorded at 0 ms completes at 5 ms, in the
  // device's time (which a replay sets to the trace's).
  auto o = quiet();
  o.lag_ns = 5'000'000;
  sim_device dev(o);
  pool_resource pool(dev, plain(0.0));
  const device_ptr a = pool.allocate(4 * MiB, 1);
  pool.allocate(3 * MiB / 2, 1);
  pool.deallocate(a, 4 * MiB, 1);
  pool.allocate(9 * MiB / 2, 1);  // h0 recycled to [6, 10); [0, 4) waits for its fence, done at 5 ms
  EXPECT_EQ(pool.stats().arena.unmaps_deferred, 1u);
  dev.set_time(4'999'999);
  pool.allocate(8 * MiB, 1);  // growth at the top, in new handles: the fence is not done, [0, 4) stays
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 0u);
  dev.set_time(5'000'000);
  pool.allocate(8 * MiB, 1);  // the next growth finds it done and unmaps [0, 4)
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 1u);
  EXPECT_EQ(calls(dev, device_call::stream_synchronize) + calls(dev, device_call::event_synchronize), 0u);
  pool.validate();
}

TEST(Pool, WithinTheBudgetGrowthCreatesInsteadOfRecycling) {
  sim_device dev(quiet());
  pool_resource pool(dev, plain(10.0));  // up to 11x in use may be cached
  const device_ptr a = pool.allocate(4 * MiB);
  pool.allocate(3 * MiB / 2);
  pool.deallocate(a, 4 * MiB);
  pool.allocate(9 * MiB / 2);  // as above, 4 MiB more mapped at the top, now in new handles; nothing unmapped
  EXPECT_EQ(pool.reserved_bytes(), 10 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 0u);
  // A cache budget of 10x never fits under the reserve bound (1.12x the peak in use), so every growth is
  // lean and its handles are granules: 2 for the first block, 1, and 2 for the last.
  EXPECT_EQ(calls(dev, device_call::mem_create), 5u);
}

TEST(Pool, BlocksLiveInZonesBySize) {
  sim_device dev(quiet());
  pool_resource pool(dev, plain());
  const device_ptr tiny = pool.allocate(4 * KiB);
  const device_ptr small = pool.allocate(64 * KiB + 512);
  const device_ptr large = pool.allocate(256 * KiB + 512);
  // Zone 0 (up to 64 KiB) starts at the arena's base, zone 1 (up to 256 KiB) one zone span above it, zone 2
  // two;
  // a 64 GiB device with an address space of 8 x its size per zone puts them 512 GiB apart.
  EXPECT_EQ(small - tiny, 512 * GiB);
  EXPECT_EQ(large - small, 512 * GiB);
  EXPECT_EQ(tiny % (2 * MiB), 0u);
  EXPECT_EQ(pool.reserved_bytes(), 6 * MiB);  // a granule for each
  // A 64 KiB block joins the 4 KiB one in zone 0's granule.
  const device_ptr tiny2 = pool.allocate(64 * KiB);
  EXPECT_EQ(tiny2, tiny + 4 * KiB);
  EXPECT_EQ(pool.reserved_bytes(), 6 * MiB);
  // The largest size of zone 1 stays there: 256 KiB joins the 64.5 KiB block in its granule.
  const device_ptr small2 = pool.allocate(256 * KiB);
  EXPECT_EQ(small2, small + 64 * KiB + 512);
  EXPECT_EQ(pool.reserved_bytes(), 6 * MiB);
  for (auto [p, n] : {std::pair{tiny, 4 * KiB}, {tiny2, 64 * KiB}, {small, 64 * KiB + 512}, {small2, 256 * KiB},
                      {large, 256 * KiB + 512}})
    pool.deallocate(p, n);
  pool.validate();
}

TEST(Pool, RejectsBadFreesAndChangesNothing) {
  sim_device dev(quiet());
  pool_resource pool(dev, pool_options{});
  const device_ptr a = pool.allocate(10000);
  const auto before = pool.stats();
  try {
    pool.deallocate(a + 512, 10000);
    FAIL() << "free of an unknown pointer was accepted";
  } catch (const usage_error& e) {
    EXPECT_NE(std::string(e.what()).find("not a block this pool handed out"), std::string::npos) << e.what();
  }
  try {
    pool.deallocate(a, 20000);
    FAIL() << "free with the wrong size was accepted";
  } catch (const usage_error& e) {
    EXPECT_NE(std::string(e.what()).find("allocated with size 10240"), std::string::npos) << e.what();
  }
  const auto after = pool.stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
  pool.deallocate(a, 10000);  // still live: the right free works
  try {
    pool.deallocate(a, 10000);
    FAIL() << "double free was accepted";
  } catch (const usage_error& e) {
    EXPECT_NE(std::string(e.what()).find("double free"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pool.allocate(0), 0u);
  pool.deallocate(0, 0);
  pool.validate();
}

TEST(Pool, AThreadCacheHandsTheSameBlockBackWithoutTheArena) {
  sim_device dev(quiet());
  pool_resource pool(dev, pool_options{});
  const device_ptr a = pool.allocate(4 * KiB);
  pool.deallocate(a, 4 * KiB);
  EXPECT_EQ(pool.allocated_bytes(), 0u);
  EXPECT_EQ(pool.stats().thread_cached_bytes, 4 * KiB);
  EXPECT_EQ(pool.allocate(4 * KiB), a);
  const auto s = pool.stats();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.frees, 1u);
  EXPECT_EQ(s.requested_bytes, 4 * KiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 1u);
  pool.validate();
}

TEST(Pool, ThePeakOfAllocatedBytesCountsBlocksKeptInAThreadsCacheWhenTheLockIsTaken) {
  // a (4 KiB) is freed into the thread's cache; b (8 KiB) misses it and takes the lock, when the peak is read:
  // 12 KiB handed out, though never more than 8 KiB were live. Then a and b again from the cache, 12 KiB live,
  // unwatched on the hot path: the peak stays 12 KiB, as it would had it been watched. Both freed into the
  // cache, reset_peak_stats() takes what is live, without what threads keep: 0.
  sim_device dev(quiet());
  pool_resource pool(dev, pool_options{});
  const device_ptr a = pool.allocate(4 * KiB);
  pool.deallocate(a, 4 * KiB);
  const device_ptr b = pool.allocate(8 * KiB);
  auto s = pool.stats();
  EXPECT_EQ(s.allocated_bytes, 8 * KiB);
  EXPECT_EQ(s.thread_cached_bytes, 4 * KiB);
  EXPECT_EQ(s.peak_allocated_bytes, 12 * KiB);
  pool.deallocate(b, 8 * KiB);
  EXPECT_EQ(pool.allocate(4 * KiB), a);
  EXPECT_EQ(pool.allocate(8 * KiB), b);
  s = pool.stats();
  EXPECT_EQ(s.allocated_bytes, 12 * KiB);
  EXPECT_EQ(s.peak_allocated_bytes, 12 * KiB);
  pool.deallocate(a, 4 * KiB);
  pool.deallocate(b, 8 * KiB);
  pool.reset_peak_stats();
  EXPECT_EQ(pool.stats().peak_allocated_bytes, 0u);
  pool.validate();
}

// e (2.5 MiB) maps two granules at the top, a 1 MiB block fills the start of the 1.5 MiB after it, and g
// (3 MiB) extends the 0.5 MiB left there by two more granules, leaving 1.5 MiB free at the top: 8 MiB mapped.
struct three_blocks {
  device_ptr e, a, g;
  explicit three_blocks(pool_resource& pool)
      : e(pool.allocate(5 * MiB / 2)), a(pool.allocate(1 * MiB)), g(pool.allocate(3 * MiB)) {
    EXPECT_EQ(a, e + 5 * MiB / 2);
    EXPECT_EQ(g, e + 7 * MiB / 2);
    EXPECT_EQ(pool.reserved_bytes(), 8 * MiB);
  }
};

TEST(Pool, ALargeRequestThatMissesTheCacheIsPlacedOverTheLargeBlocksItHolds) {
  // three_blocks, then the 1 MiB block freed waits in the thread's cache. A 768 KiB request misses the
  // cache (another size); the pool takes the cached block back first, so best fit chooses its 1 MiB (with
  // the 0.5 MiB beside it after g, 1 MiB: [e+2.5, e+3.5)) over the 1.5 MiB at the top, and nothing more is
  // mapped.
  sim_device dev(quiet());
  pool_resource pool(dev, pool_options{});
  const device_ptr a = three_blocks(pool).a;
  pool.deallocate(a, 1 * MiB);
  EXPECT_EQ(pool.stats().thread_cached_bytes, 1 * MiB);
  const device_ptr x = pool.allocate(768 * KiB);
  EXPECT_EQ(x, a);
  EXPECT_EQ(pool.stats().thread_cached_bytes, 0u);
  EXPECT_EQ(pool.reserved_bytes(), 8 * MiB);
  // The same size again is the hot path's: freed and asked for, it comes back from the cache as it was.
  pool.deallocate(x, 768 * KiB);
  EXPECT_EQ(pool.allocate(768 * KiB), x);
  EXPECT_EQ(pool.stats().hot_path_stops, 0u);
  pool.validate();
}

TEST(Pool, LargeBlocksInAnotherThreadsCacheAreTakenBackOnlyWhenMappedMemoryCannotServe) {
  // As above, but another thread, still alive, frees the 1 MiB block into its own cache. The main thread's
  // 768 KiB request fits the 1.5 MiB free at the top, [e+6.5, e+8) MiB: it is placed there, and the other
  // thread, which may want its block again at once, is not stopped. A 1 MiB request then finds 0.75 MiB
  // free in mapped memory: the pool stops the hot path once, takes the block back, and places it there
  // rather than map more.
  sim_device dev(quiet());
  pool_resource pool(dev, pool_options{});
  const three_blocks blocks(pool);
  const device_ptr a = blocks.a;
  std::mutex m;
  std::condition_variable cv;
  int step = 0;
  std::thread other([&] {
    pool.deallocate(a, 1 * MiB);
    std::unique_lock lock(m);
    step = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return step == 2; });
  });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return step == 1; });
  }
  EXPECT_EQ(pool.stats().thread_cached_bytes, 1 * MiB);
  const std::uint64_t stops = pool.stats().hot_path_stops;
  const device_ptr x = pool.allocate(768 * KiB);
  EXPECT_EQ(x, blocks.e + 13 * MiB / 2);
  EXPECT_EQ(pool.stats().hot_path_stops, stops);
  EXPECT_EQ(pool.stats().thread_cached_bytes, 1 * MiB);
  EXPECT_EQ(pool.allocate(1 * MiB), a);
  EXPECT_EQ(pool.stats().hot_path_stops, stops + 1);
  EXPECT_EQ(pool.stats().thread_cached_bytes, 0u);
  EXPECT_EQ(pool.reserved_bytes(), 8 * MiB);
  // A small request leaves other threads' caches alone: no stop.
  const device_ptr s = pool.allocate(4 * KiB);
  EXPECT_EQ(pool.stats().hot_path_stops, stops + 1);
  {
    std::lock_guard lock(m);
    step = 2;
  }
  cv.notify_all();
  other.join();
  pool.deallocate(s, 4 * KiB);
  pool.deallocate(x, 768 * KiB);
  pool.deallocate(a, 1 * MiB);
  pool.validate();
}

TEST(Pool, BlocksInAnotherLiveThreadsCacheServeARequestWhenMemoryRunsOut) {
  // 8 MiB device: four 2 MiB handles. A second thread allocates and frees 6 MiB and stays alive, its cache
  // holding the block. The main thread's 6 MiB request finds the device full (6 + 6 > 8): the pool stops the
  // hot path, takes the block from the other thread's cache and serves the request from the same memory.
  sim_device dev(quiet(8 * MiB));
  pool_options o;
  o.thread_cache_bytes = 8 * MiB;
  pool_resource pool(dev, o);
  std::mutex m;
  std::condition_variable cv;
  int step = 0;
  device_ptr theirs = 0;
  std::thread other([&] {
    theirs = pool.allocate(6 * MiB);
    pool.deallocate(theirs, 6 * MiB);
    std::unique_lock lock(m);
    step = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return step == 2; });
    // Its cache was emptied: the same request now goes to the arena and finds the main thread's block there.
    EXPECT_EQ(pool.try_allocate(6 * MiB), 0u);
  });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return step == 1; });
  }
  EXPECT_EQ(pool.stats().thread_cached_bytes, 6 * MiB);
  const std::uint64_t stops = pool.stats().hot_path_stops;
  const device_ptr mine = pool.allocate(6 * MiB);
  EXPECT_EQ(mine, theirs);
  EXPECT_EQ(pool.stats().hot_path_stops, stops + 1);
  EXPECT_EQ(pool.stats().thread_cached_bytes, 0u);
  EXPECT_EQ(pool.reserved_bytes(), 6 * MiB);
  {
    std::lock_guard lock(m);
    step = 2;
  }
  cv.notify_all();
  other.join();
  pool.deallocate(mine, 6 * MiB);
  pool.validate();
}

// A thread that runs what it is given, one call at a time, and keeps its thread cache between calls.
class second_thread {
 public:
  second_thread() : t_([this] { loop(); }) {}
  ~second_thread() {
    run({});
    t_.join();
  }
  /// Runs @p fn there and waits for it; an empty one ends the thread.
  void run(std::function<void()> fn) {
    std::unique_lock lock(m_);
    job_ = std::move(fn);
    pending_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !pending_; });
  }

 private:
  void loop() {
    for (;;) {
      std::unique_lock lock(m_);
      cv_.wait(lock, [&] { return pending_; });
      const bool last = !job_;
      if (job_) job_();
      pending_ = false;
      cv_.notify_all();
      if (last) return;
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool pending_ = false;
  std::thread t_;
};

// Two threads pass an 8 MiB block between them: the other thread frees it into its cache, the main thread
// misses its own, finds no mapped memory free and takes the block back (one stop). The other thread then
// grows the pool by 8 MiB and caches that block too, and the main thread asks for a second 8 MiB block: a
// second take-back so soon means the threads hold more blocks than the pool has.
struct take_back_run {
  std::uint64_t stops = 0;  // during the second request
  std::uint64_t growths_instead = 0;
  std::size_t reserved = 0;
  bool second_took_theirs = false;
};
take_back_run second_take_back(std::size_t ballast, std::int64_t gap_ns) {
  sim_device dev(quiet());
  pool_resource pool(dev, pool_options{});
  const device_ptr b = ballast != 0 ? pool.allocate(ballast) : 0;
  second_thread other;
  device_ptr t1 = 0, t2 = 0;
  other.run([&] {
    t1 = pool.allocate(8 * MiB);
    pool.deallocate(t1, 8 * MiB);
  });
  dev.set_time(5'000'000);
  const std::uint64_t stops0 = pool.stats().hot_path_stops;
  const device_ptr m1 = pool.allocate(8 * MiB);
  EXPECT_EQ(m1, t1);
  EXPECT_EQ(pool.stats().hot_path_stops, stops0 + 1);  // the first take-back
  EXPECT_EQ(pool.stats().take_back_growths, 0u);
  other.run([&] {
    t2 = pool.allocate(8 * MiB);  // nothing cached anywhere: the pool grows
    pool.deallocate(t2, 8 * MiB);
  });
  EXPECT_EQ(pool.reserved_bytes(), ballast + 16 * MiB);
  EXPECT_EQ(pool.stats().thread_cached_bytes, 8 * MiB);
  dev.set_time(5'000'000 + gap_ns);
  const std::uint64_t stops1 = pool.stats().hot_path_stops;
  const device_ptr m2 = pool.allocate(8 * MiB);
  take_back_run r{pool.stats().hot_path_stops - stops1, pool.stats().take_back_growths, pool.reserved_bytes(), m2 == t2};
  pool.deallocate(m2, 8 * MiB);
  pool.deallocate(m1, 8 * MiB);
  if (b != 0) pool.deallocate(b, ballast);
  pool.validate();
  return r;
}

TEST(Pool, ASecondTakeBackWithinAMillisecondGrowsThePoolInsteadUnderItsReserveBound) {
  // With 64 MiB live beside them, the peak of the bytes in blocks is 64 + 8 + 8 = 80 MiB and the reserve
  // bound 1.12 x 80 = 89.6 MiB: growing to 88 MiB fits under it. Half a millisecond after the first take-back,
  // the pool grows instead of stopping the threads again, and the other thread keeps its block.
  const take_back_run soon = second_take_back(64 * MiB, 500'000);
  EXPECT_EQ(soon.stops, 0u);
  EXPECT_EQ(soon.growths_instead, 1u);
  EXPECT_EQ(soon.reserved, 88 * MiB);
  EXPECT_FALSE(soon.second_took_theirs);
  // Two milliseconds later, the take-backs are far apart: the block is taken back as before (one stop).
  const take_back_run later = second_take_back(64 * MiB, 2'000'000);
  EXPECT_EQ(later.stops, 1u);
  EXPECT_EQ(later.growths_instead, 0u);
  EXPECT_EQ(later.reserved, 80 * MiB);
  EXPECT_TRUE(later.second_took_theirs);
  // Without the 64 MiB the peak is 16 MiB, and 24 MiB is above 1.12 x 16 = 17.92 MiB: taken back, however soon.
  const take_back_run bound = second_take_back(0, 500'000);
  EXPECT_EQ(bound.stops, 1u);
  EXPECT_EQ(bound.growths_instead, 0u);
  EXPECT_EQ(bound.reserved, 16 * MiB);
  EXPECT_TRUE(bound.second_took_theirs);
}

TEST(Pool, TheBlockTableGrowsWithoutLosingAState) {
  // 1024 slots to start, grown once half are used: 3000 live blocks make it grow (at least twice); the freed
  // half then sit in the thread cache as `cached`, and every state must have survived the moves.
  // Eight 4 KiB blocks sit in the thread's cache across the growths: they must come back from it, and be
  // freed again, with their states found in the new tables.
  sim_device dev(quiet());
  pool_resource pool(dev, pool_options{});
  std::vector<device_ptr> early;
  for (int i = 0; i < 8; ++i) early.push_back(pool.allocate(4 * KiB));
  for (device_ptr p : early) pool.deallocate(p, 4 * KiB);
  std::vector<device_ptr> blocks;
  for (int i = 0; i < 3000; ++i) blocks.push_back(pool.allocate(512));
  EXPECT_GE(pool.stats().hot_path_stops, 2u);
  std::vector<device_ptr> again;
  for (int i = 0; i < 8; ++i) again.push_back(pool.allocate(4 * KiB));
  EXPECT_EQ(std::set<device_ptr>(again.begin(), again.end()), std::set<device_ptr>(early.begin(), early.end()));
  EXPECT_EQ(pool.stats().thread_cached_bytes, 0u);
  for (device_ptr p : again) pool.deallocate(p, 4 * KiB);
  for (device_ptr p : again) EXPECT_THROW(pool.deallocate(p, 4 * KiB), usage_error);
  for (int i = 0; i < 3000; i += 2) pool.deallocate(blocks[static_cast<std::size_t>(i)], 512);
  pool.validate();  // cached blocks in the table == bytes in the caches; live + cached == arena in use
  for (int i = 0; i < 3000; i += 2) EXPECT_THROW(pool.deallocate(blocks[static_cast<std::size_t>(i)], 512), usage_error);
  for (int i = 1; i < 3000; i += 2) pool.deallocate(blocks[static_cast<std::size_t>(i)], 512);
  EXPECT_EQ(pool.allocated_bytes(), 0u);
  pool.validate();
}

TEST(Pool, ABlockFreedOnAStreamWithWorkInFlightWaitsForIt) {
  sim_device dev(quiet());
  pool_resource pool(dev, pool_options{});
  const device_ptr a = pool.allocate(4 * KiB, 1);
  const device_ptr b = pool.allocate(4 * KiB, 2);  // a second stream: it waits for stream 1's work, on the device
  EXPECT_EQ(calls(dev, device_call::stream_synchronize), 0u);
  EXPECT_EQ(calls(dev, device_call::stream_wait_event), 1u);
  dev.hold(1);
  pool.deallocate(a, 4 * KiB, 1);
  // Stream 2 may not have a while stream 1's work is in flight: not from the cache (a is stream 1's), and
  // not after a flush either, since a then waits for an event recorded on stream 1.
  const device_ptr c = pool.allocate(4 * KiB, 2);
  EXPECT_NE(c, a);
  pool.release_cached();  // flushes caches; a's event cannot complete while stream 1 is held... 
  // ...so release_cached waits on it (synchronizing the event completes stream 1's work in the simulator).
  EXPECT_EQ(calls(dev, device_call::event_synchronize), 1u);
  const device_ptr d = pool.allocate(4 * KiB, 2);
  EXPECT_EQ(d, a);  // back in the arena: the best fit is a's own 4 KiB hole
  dev.release(1);
  for (auto [p, s] : {std::pair{b, 2}, {c, 2}, {d, 2}}) pool.deallocate(p, 4 * KiB, static_cast<stream_id>(s));
  pool.validate();
}

TEST(Pool, ANewStreamWaitsOnTheDeviceForWorkOnMemoryFreedWithoutEvents) {
  // One stream so far: a is freed with stream 1's work in flight and goes back to the arena with no event.
  // When stream 2 appears it may get a, but its work is queued behind stream 1's: the pool made it wait for
  // an event recorded on stream 1 (cuStreamWaitEvent). The host never waits. A third stream waits too.
  sim_device dev(quiet());
  pool_resource pool(dev, plain());
  const device_ptr a = pool.allocate(4 * KiB, 1);
  dev.hold(1);
  pool.deallocate(a, 4 * KiB, 1);
  const device_ptr b = pool.allocate(4 * KiB, 2);
  EXPECT_EQ(b, a);  // the best fit: a's own hole
  const event_id work = dev.event_create();
  dev.event_record(work, 2);  // stream 2's first work with b
  EXPECT_FALSE(dev.event_query(work));  // behind stream 1's
  dev.release(1);
  EXPECT_TRUE(dev.event_query(work));
  const device_ptr c = pool.allocate(4 * KiB, 3);
  EXPECT_EQ(calls(dev, device_call::stream_wait_event), 2u);
  EXPECT_EQ(calls(dev, device_call::stream_synchronize) + calls(dev, device_call::event_synchronize), 0u);
  dev.event_destroy(work);
  pool.deallocate(b, 4 * KiB, 2);
  pool.deallocate(c, 4 * KiB, 3);
  pool.validate();
}

TEST(Pool, RecordStreamHoldsTheBlockForTheOtherStreamToo) {
  sim_device dev(quiet());
  pool_resource pool(dev, plain());
  const device_ptr a = pool.allocate(4 * KiB, 1);
  pool.record_stream(a, 2);
  dev.hold(2);
  pool.deallocate(a, 4 * KiB, 1);
  EXPECT_EQ(pool.stats().pending_bytes, 4 * KiB);
  const device_ptr b = pool.allocate(4 * KiB, 1);  // stream 2 may still read a
  EXPECT_NE(b, a);
  dev.release(2);
  const device_ptr c = pool.allocate(4 * KiB, 1);  // the event completed: a is free again
  EXPECT_EQ(c, a);
  EXPECT_EQ(pool.stats().pending_bytes, 0u);
  EXPECT_THROW(pool.record_stream(a + 512, 2), usage_error);
  pool.validate();
}

TEST(Pool, ALimitIsHonouredAndNamedWhenHit) {
  sim_device dev(quiet());
  pool_resource pool(dev, plain());
  pool.set_limit(8 * MiB);
  EXPECT_EQ(pool.limit(), 8 * MiB);
  // Handles are kept to 1/16 of what the limit leaves, so to one granule here: three 2 MiB handles.
  const device_ptr a = pool.allocate(6 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 3u);
  // 6 MiB live + 4 > 8: it cannot fit beside the blocks in use, so it fails at once, with no driver call.
  EXPECT_EQ(pool.try_allocate(4 * MiB), 0u);
  EXPECT_EQ(calls(dev, device_call::mem_create), 3u);
  EXPECT_EQ(calls(dev, device_call::mem_release), 0u);
  try {
    pool.allocate(4 * MiB);
    FAIL() << "allocation past the limit succeeded";
  } catch (const out_of_memory& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("allocating 4.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("limit 8.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("reserves 6.00 MiB"), std::string::npos) << m;
  }
  EXPECT_EQ(pool.stats().failed_allocations, 2u);
  EXPECT_EQ(calls(dev, device_call::mem_release), 0u);
  pool.deallocate(a, 6 * MiB);
  // a's three handles are cold: 4 MiB at their start pins two of them, as many as new memory would, so the
  // mapped memory wins: no new memory, no driver call.
  const std::uint64_t maps = calls(dev, device_call::mem_map);
  const device_ptr b = pool.allocate(4 * MiB);
  EXPECT_EQ(b, a);
  EXPECT_EQ(pool.reserved_bytes(), 6 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_map), maps);
  pool.deallocate(b, 4 * MiB);
  pool.validate();
}

TEST(Pool, ARequestTheDeviceCannotHoldFailsAtOnceAndSaysSo) {
  sim_device dev(quiet(16 * MiB));
  pool_resource pool(dev, plain());
  // More than the whole device: no handle is made for it.
  try {
    pool.allocate(32 * MiB, 3);
    FAIL() << "an allocation larger than the device succeeded";
  } catch (const out_of_memory& e) {
    EXPECT_EQ(std::string(e.what()),
              "vram: out of memory allocating 32.00 MiB on stream 3: more than the device holds (16.00 MiB). Ask for "
              "less, or use a larger device.");
  }
  EXPECT_EQ(calls(dev, device_call::mem_create), 0u);
  // 16 MiB exactly fits the empty device: 8 handles of one granule (1/1024 of the device rounds up to it).
  const device_ptr a = pool.allocate(16 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_create), 8u);
  pool.deallocate(a, 16 * MiB);
  // 12 MiB live + 8 > 16: no limit set, so none to raise.
  const device_ptr b = pool.allocate(12 * MiB);
  try {
    pool.allocate(8 * MiB);
    FAIL() << "an allocation past the device succeeded";
  } catch (const out_of_memory& e) {
    EXPECT_TRUE(std::string(e.what()).ends_with("Free live blocks, ask for less, or use a larger device.")) << e.what();
  }
  pool.deallocate(b, 12 * MiB);
  // Under a limit, the limit is what holds: 12 MiB > 10 MiB fails with no call, and names the limit.
  pool.set_limit(10 * MiB);
  const std::uint64_t creates = calls(dev, device_call::mem_create), releases = calls(dev, device_call::mem_release);
  try {
    pool.allocate(12 * MiB);
    FAIL() << "an allocation larger than the limit succeeded";
  } catch (const out_of_memory& e) {
    EXPECT_EQ(std::string(e.what()),
              "vram: out of memory allocating 12.00 MiB on stream 0: more than the limit holds (10.00 MiB). Ask for "
              "less, or raise the limit.");
  }
  EXPECT_EQ(calls(dev, device_call::mem_create), creates);
  EXPECT_EQ(calls(dev, device_call::mem_release), releases);
  EXPECT_EQ(pool.stats().failed_allocations, 3u);
  pool.validate();
}

TEST(Pool, OnAFullDeviceItRecyclesAndRetriesBeforeFailing) {
  // On a 16 MiB device every handle is one 2 MiB granule (1/1024 of the device rounds up to it).
  sim_device dev(quiet(16 * MiB));
  pool_resource pool(dev, plain(100.0));  // never recycles for the budget's sake: only when the device refuses
  const device_ptr a = pool.allocate(6 * MiB);  // 3 handles at [0, 6) MiB
  const device_ptr b = pool.allocate(4 * MiB);  // 2 handles at [6, 10) MiB
  // 10 MiB live + 8 > 16: it fails at once, with no driver call.
  EXPECT_EQ(pool.try_allocate(8 * MiB), 0u);
  EXPECT_EQ(pool.stats().arena.out_of_memory_recoveries, 0u);
  EXPECT_EQ(calls(dev, device_call::mem_create), 5u);
  EXPECT_EQ(pool.reserved_bytes(), 10 * MiB);
  pool.deallocate(a, 6 * MiB);
  // 8 MiB fits not in a's cold 6 MiB, and b ends the mapped memory, so 8 MiB is mapped at the top: three new
  // handles fill the device, the fourth is refused, so a's 3 cold handles are unmapped, one is mapped at the
  // top and the other two are released. Reserved: 10 + 6 - 4 = 12 MiB.
  const device_ptr c = pool.allocate(8 * MiB);
  EXPECT_EQ(c, b + 4 * MiB);
  EXPECT_EQ(pool.reserved_bytes(), 12 * MiB);
  EXPECT_EQ(calls(dev, device_call::mem_unmap), 3u);
  EXPECT_EQ(calls(dev, device_call::mem_release), 2u);
  EXPECT_EQ(pool.stats().arena.out_of_memory_recoveries, 1u);
  pool.deallocate(b, 4 * MiB);
  pool.deallocate(c, 8 * MiB);
  pool.validate();
}

// The random run near the limit of the two tests below. With @p lag > 0 the blocks use one stream, held and
// released every @p lag steps, as a GPU runs behind the host: unmaps wait for fences over its work.
void near_limit_run(int lag) {
  sim_device dev(quiet());
  pool_options o = plain();
  o.limit = 192 * MiB;
  pool_resource pool(dev, o);
  std::mt19937_64 rng(20261203);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  struct block {
    device_ptr p;
    std::size_t bytes;
    stream_id stream;
  };
  std::vector<block> blocks;
  test_support::live_map live;
  std::size_t live_bytes = 0;
  bool saw_views = false;
  auto free_at = [&](std::size_t i) {
    const block b = blocks[i];
    blocks[i] = blocks.back();
    blocks.pop_back();
    live.remove(b.p);
    pool.deallocate(b.p, b.bytes, b.stream);
    live_bytes -= b.bytes;
  };
  auto hold = [&] {
    dev.hold(1);
    dev.hold(2);
  };
  if (lag > 0) hold();
  for (int step = 0; step < 3000; ++step) {
    if (lag > 0 && step % lag == lag - 1) {
      dev.release(1);
      dev.release(2);
      hold();
    }
    const auto bytes = static_cast<std::size_t>(std::floor(std::exp2(9.0 + 15.0 * unit(rng))));
    const bool alloc = blocks.empty() || (unit(rng) < 0.6 && live_bytes + bytes <= 160 * MiB);
    if (alloc) {
      // One stream when the device lags, as PyTorch's: its frees carry no event, so unmaps wait for fences.
      const stream_id drawn = 1 + rng() % 2;
      const stream_id s = lag > 0 ? 1 : drawn;
      const device_ptr p = pool.try_allocate(bytes, s);
      if (p == 0) {
        free_at(rng() % blocks.size());
        continue;
      }
      ASSERT_TRUE(live.add(p, bytes)) << "step " << step << ": " << bytes << " bytes at " << p << " overlap a live block";
      blocks.push_back({p, bytes, s});
      live_bytes += bytes;
      if (!saw_views && pool.stats().arena.aliases_mapped > 0) {
        // The block just placed through an alias: its handle shows both views in the snapshot.
        saw_views = true;
        const auto snap = pool.snapshot();
        const auto two = std::count_if(snap["handles"].begin(), snap["handles"].end(),
                                       [](const nlohmann::json& h) { return h["views"].size() >= 2; });
        EXPECT_GE(two, 1) << "step " << step;
      }
    } else {
      free_at(rng() % blocks.size());
    }
    ASSERT_LE(pool.reserved_bytes(), 192 * MiB) << "step " << step;
    if (lag > 0 || step % 16 == 15) ASSERT_NO_THROW(pool.validate()) << "step " << step;
  }
  while (!blocks.empty()) free_at(blocks.size() - 1);
  if (lag > 0) {
    dev.release(1);
    dev.release(2);
    // Unmaps did wait for their fences, so the books had views gone that the device still mapped.
    EXPECT_GT(pool.stats().arena.unmaps_deferred, 0u);
  }
  pool.validate();
  EXPECT_TRUE(saw_views);
  EXPECT_GT(pool.stats().arena.aliases_mapped, 0u);
  EXPECT_GT(pool.stats().arena.hole_growths, 0u);
  EXPECT_EQ(pool.allocated_bytes(), 0u);
}

TEST(Pool, NearItsLimitARandomRunGrowsIntoHolesAndThroughAliasesAndStaysConsistent) {
  // The CPU twin of GpuPoolTight: a 192 MiB limit (handles of one granule; the pool tight), no thread caches,
  // two streams, 3000 steps of sizes log-uniform in [512 B, 16 MiB] with at most 160 MiB live. Blocks never
  // share an address, validate() (which checks that each byte of every handle is owned by one view) holds
  // throughout, and the run does use holes and aliases.
  near_limit_run(0);
}

TEST(Pool, NearItsLimitWithTheDeviceBehindTheHostUnmapsOnlyOnceFencesAreDoneAndStaysConsistent) {
  // The same run on one stream whose work completes only every 7 steps: the pool at its limit then unmaps views
  // whose fences are pending, and growth must not take the address ranges they leave for gaps (or use pieces
  // beside them) before the device has unmapped them. Under a 192 MiB limit on an H200 a serving loop crashed
  // where the piece index kept the free start of such a view.
  near_limit_run(7);
}

TEST(Pool, TrimGivesEverythingFreeBack) {
  sim_device dev(quiet());
  pool_resource pool(dev, pool_options{});
  const device_ptr a = pool.allocate(5 * MiB);
  const device_ptr b = pool.allocate(4 * KiB);
  pool.deallocate(a, 5 * MiB);
  pool.deallocate(b, 4 * KiB);
  // 5 MiB: one 6 MiB handle over its three granules; 4 KiB: one 2 MiB handle in the tiny zone.
  EXPECT_EQ(pool.reserved_bytes(), 8 * MiB);
  EXPECT_EQ(pool.trim(), 8 * MiB);
  EXPECT_EQ(pool.reserved_bytes(), 0u);
  EXPECT_EQ(dev.used_bytes(), 0u);
  pool.validate();
}

TEST(Pool, SettingsComeFromTheTableAndBadOnesAreNamed) {
  EXPECT_EQ(pool_options{}.with({{"max_cached_ratio", "0.25"}}).max_cached_ratio, 0.25);
  EXPECT_EQ(pool_options{}.with({{"max_handle", "32MiB"}}).max_handle_bytes, 32 * MiB);
  EXPECT_FALSE(pool_options{}.with({{"thread_cache", "0"}}).thread_cache);
  EXPECT_TRUE(pool_options{}.membarrier);
  EXPECT_FALSE(pool_options{}.with({{"membarrier", "off"}}).membarrier);
  EXPECT_THROW(pool_options{}.with({{"max_cached", "1"}}), usage_error);
  EXPECT_THROW(pool_options{}.with({{"max_cached_ratio", "-1"}}), usage_error);
  EXPECT_EQ(pool_options{}.reserve_ratio, 1.12);
  EXPECT_EQ(pool_options{}.with({{"reserve_ratio", "0"}}).reserve_ratio, 0.0);
  EXPECT_THROW(pool_options{}.with({{"reserve_ratio", "many"}}), usage_error);
  EXPECT_EQ(pool_options{}.small_handle_bytes, 8 * MiB);
  EXPECT_EQ(pool_options{}.with({{"small_handle", "0"}}).small_handle_bytes, 0u);
  EXPECT_EQ(pool_options{}.with({{"burst_bytes", "1GiB"}}).burst_bytes, GiB);
  EXPECT_EQ(pool_options{}.with({{"burst_window", "2.5"}}).burst_window_ms, 2.5);
  EXPECT_THROW(pool_options{}.with({{"burst_window", "-1"}}), usage_error);
  EXPECT_THROW(pool_options{}.with({{"small_handle", "big"}}), usage_error);
  EXPECT_EQ(pool_options{}.spare_slack_bytes, 2 * MiB);
  EXPECT_EQ(pool_options{}.with({{"spare_slack", "0"}}).spare_slack_bytes, 0u);
  EXPECT_EQ(pool_options{}.with({{"spare_slack", "64MiB"}}).spare_slack_bytes, 64 * MiB);
  EXPECT_THROW(pool_options{}.with({{"spare_slack", "-1"}}), usage_error);
  EXPECT_TRUE(pool_options{}.holes_below_peak);
  EXPECT_FALSE(pool_options{}.with({{"holes_below_peak", "0"}}).holes_below_peak);
  EXPECT_THROW(pool_options{}.with({{"holes_below_peak", "maybe"}}), usage_error);
  EXPECT_EQ(pool_options{}.block_handles, 8u);
  EXPECT_EQ(pool_options{}.with({{"block_handles", "0"}}).block_handles, 0u);
  EXPECT_EQ(pool_options{}.with({{"block_handles", "1024"}}).block_handles, 1024u);
  for (const char* bad : {"2.5", "-1", "1025", "", "many"})
    EXPECT_THROW(pool_options{}.with({{"block_handles", bad}}), usage_error) << bad;
}

TEST(Pool, NonFiniteAndOutOfRangeSettingsAreRefusedNamingTheSettingOrVariable) {
  const auto message = [](const policy_options& settings) {
    try {
      (void)pool_options{}.with(settings);
    } catch (const usage_error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message({{"burst_window", "1e300"}}),
            "vram pool setting burst_window: '1e300': want milliseconds from 0 to 3600000, or a time with its unit "
            "(10ms, 500us)");
  EXPECT_EQ(message({{"burst_window", "2h"}}).rfind("vram pool setting burst_window: ", 0), 0u);  // no unit 'h'
  EXPECT_EQ(message({{"burst_window", "3601s"}}),
            "vram pool setting burst_window: '3601s' is out of range: want at most 3600000 ms");
  EXPECT_EQ(message({{"burst_window", "-5ms"}}).rfind("vram pool setting burst_window: ", 0), 0u);
  EXPECT_EQ(pool_options{}.with({{"burst_window", "5ms"}}).burst_window_ms, 5.0);
  EXPECT_EQ(pool_options{}.with({{"burst_window", "500us"}}).burst_window_ms, 0.5);
  EXPECT_EQ(pool_options{}.with({{"burst_window", "1s"}}).burst_window_ms, 1000.0);
  EXPECT_EQ(message({{"max_cached_ratio", "nan"}}), "vram pool setting max_cached_ratio: 'nan': want a number from 0 to 1000");
  EXPECT_EQ(message({{"reserve_ratio", "inf"}}), "vram pool setting reserve_ratio: 'inf': want a number from 0 to 1000");
  EXPECT_EQ(message({{"reserve_ratio", "1001"}}),
            "vram pool setting reserve_ratio: '1001' is out of range: want a number from 0 to 1000");
  EXPECT_EQ(message({{"aliasing", "yes"}}), "vram pool setting aliasing: 'yes': want 1 or 0");
  EXPECT_EQ(message({{"limit", "abc"}}).rfind("vram pool setting limit: bad size 'abc'", 0), 0u) << message({{"limit", "abc"}});
  EXPECT_EQ(pool_options{}.with({{"burst_window", "3600000"}}).burst_window_ms, 3600000.0);  // the bound itself

  setenv("VRAM_MAX_CACHED_RATIO", "-inf", 1);
  try {
    (void)pool_options::from_environment();
    ADD_FAILURE() << "VRAM_MAX_CACHED_RATIO=-inf was accepted";
  } catch (const usage_error& e) {
    EXPECT_STREQ(e.what(), "environment variable VRAM_MAX_CACHED_RATIO: '-inf': want a number from 0 to 1000");
  }
  unsetenv("VRAM_MAX_CACHED_RATIO");
}

}  // namespace
}  // namespace vram
