// The replay loop's metrics, on hand-made traces against a resource whose every figure is known:
// exact_resource reserves exactly the 512-rounded size of each live block, up to a limit.
#include <gtest/gtest.h>

#include <limits>
#include <unordered_map>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/emulation/cuda_direct_resource.hpp"
#include "vram/pool/pool_resource.hpp"
#include "vram/replay/replay.hpp"
#include "vram/resource/memory_resource.hpp"

namespace vram {
namespace {

class exact_resource final : public memory_resource {
 public:
  exact_resource(device& d, std::size_t limit) : memory_resource(d), limit_(limit) {}
  std::string_view name() const noexcept override { return "exact"; }
  free_space free_memory() const override { return {}; }

 protected:
  device_ptr do_allocate(std::size_t bytes, stream_id) override {
    times.push_back(upstream_device().now_ns());
    const std::size_t r = round_up(bytes, 512);
    if (allocated_ + r > limit_) return 0;
    allocated_ += r;
    reserved_ = allocated_;
    next_ += r;
    live_[next_] = r;
    return next_;
  }
  void do_deallocate(device_ptr p, std::size_t, stream_id) override {
    times.push_back(upstream_device().now_ns());
    auto it = live_.find(p);
    if (it == live_.end()) throw usage_error("not live");
    allocated_ -= it->second;
    reserved_ = allocated_;
    live_.erase(it);
  }

 private:
  std::size_t limit_;
  device_ptr next_ = 1 << 20;

 public:
  std::vector<std::int64_t> times;  // the device's time at each call
  std::unordered_map<device_ptr, std::size_t> live_;
};

trace hand_trace() {
  using a = trace_action;
  trace t;
  t.name = "hand";
  t.events = {
      {0, 0xA00, 1000, 0, a::alloc},            // live 1000, reserved 1024
      {10, 0xB00, 3000, 0, a::alloc},           // live 4000, reserved 4096 (peak)
      {30, 0xA00, 1000, 0, a::free_requested},  // live 3000, reserved 3072
      {40, 0xC00, 512, 0, a::alloc},            // live 3512, reserved 3584
      {100, 0xB00, 3000, 0, a::free_requested}, // live 512, reserved 512
      {100, 0xF00, 64, 0, a::free_requested},   // matches nothing: counted, skipped
      {110, 0xC00, 512, 0, a::free_requested},  // live 0
      {120, 0x1, 2 * MiB, 0, a::segment_alloc}, // recorded allocator's rows: compared only
      {130, 0x1, 2 * MiB, 0, a::segment_free},
  };
  return t;
}

sim_device_options quiet() {
  sim_device_options o;
  o.costs = cost_model::zero();
  return o;
}

TEST(Replay, MeasuresEveryMetricOfAHandMadeTrace) {
  sim_device dev(quiet());
  exact_resource r(dev, 1 * GiB);
  const replay_result m = replay(hand_trace(), r, {.validate_each_step = true});
  EXPECT_EQ(m.trace, "hand");
  EXPECT_EQ(m.policy, "exact");
  EXPECT_EQ(m.events, 9u);
  EXPECT_EQ(m.allocations, 3u);
  EXPECT_EQ(m.unmatched_frees, 1u);
  EXPECT_EQ(m.failed_allocations, 0u);
  EXPECT_EQ(m.peak_live_bytes, 4000u);
  EXPECT_EQ(m.peak_reserved_bytes, 4096u);
  EXPECT_EQ(m.peak_allocated_bytes, 4096u);
  EXPECT_DOUBLE_EQ(m.reserved_over_live, 4096.0 / 4000.0);
  EXPECT_DOUBLE_EQ(m.internal_fragmentation, 1.0 - 4000.0 / 4096.0);  // at the peak reserved
  EXPECT_DOUBLE_EQ(m.external_fragmentation, 0.0);
  // Time-weighted reserved/live while live > 0: [0,10) 1024/1000, [10,30) 4096/4000, [30,40) 3072/3000,
  // [40,100) 3584/3512, [100,110) 512/512; 110 us in all.
  const double expected = (10 * 1.024 + 20 * 1.024 + 10 * 1.024 + 60 * (3584.0 / 3512.0) + 10 * 1.0) / 110.0;
  EXPECT_NEAR(m.mean_reserved_over_live, expected, 1e-12);
  ASSERT_TRUE(m.recorded_peak_reserved_bytes.has_value());
  EXPECT_EQ(*m.recorded_peak_reserved_bytes, 2 * MiB);
  EXPECT_DOUBLE_EQ(m.trace_seconds, 130e-6);
  EXPECT_EQ(m.final_reserved_bytes, 0u);
}

TEST(Replay, TheAllocatorSeesTheTraceTimeOfEachRow) {
  sim_device dev(quiet());
  EXPECT_EQ(dev.now_ns(), 0);  // the simulated device's time moves only when set
  exact_resource r(dev, MiB);
  trace t = hand_trace();
  for (auto& e : t.events) e.time_us += 5'000'000;  // from the first row: 0, 10, 30, 40, 100, (100), 110 us
  replay(t, r);
  EXPECT_EQ(r.times, (std::vector<std::int64_t>{0, 10'000, 30'000, 40'000, 100'000, 110'000}));
  EXPECT_EQ(dev.now_ns(), 0);  // and after the replay it is the device's own again
  dev.set_time(7);
  EXPECT_EQ(dev.now_ns(), 7);
  dev.follow_clock();
  EXPECT_EQ(dev.now_ns(), 0);
}

TEST(Replay, ProgressIsToldBeforeEach1024thRowWithTheRowsDoneAndTheTotal) {
  // 1500 alloc / free pairs and one segment row: 3001 rows. Told before rows 1024 and 2048 (not 0, nor
  // 3072, past the end), segment rows counted like any other.
  using a = trace_action;
  trace t;
  t.name = "pairs";
  for (std::int64_t k = 0; k < 1500; ++k) {
    t.events.push_back({2 * k, 0x1000, 512, 0, a::alloc});
    t.events.push_back({2 * k + 1, 0x1000, 512, 0, a::free_requested});
  }
  t.events.push_back({3000, 0x1, 2 * MiB, 0, a::segment_alloc});
  sim_device dev(quiet());
  exact_resource r(dev, MiB);
  replay_options o;
  std::vector<std::pair<std::size_t, std::size_t>> told;
  o.progress = [&](std::size_t done, std::size_t total) { told.emplace_back(done, total); };
  const replay_result res = replay(t, r, o);
  EXPECT_EQ(told, (std::vector<std::pair<std::size_t, std::size_t>>{{1024, 3001}, {2048, 3001}}));
  EXPECT_EQ(res.allocations, 1500u);
}

TEST(Replay, TimesThatSpanTheWholeRangeSaturateTheDeviceClock) {
  // From 0 to 2^63 - 1 us: the device's nanoseconds would overflow; they stop at the largest whole
  // microsecond count that fits, and the replay's own figures, in microseconds, are exact.
  sim_device dev(quiet());
  exact_resource r(dev, MiB);
  constexpr std::int64_t end = std::numeric_limits<std::int64_t>::max();
  trace t;
  t.events = {{0, 0xA00, 1000, 0, trace_action::alloc}, {end, 0xA00, 1000, 0, trace_action::free_requested}};
  const replay_result m = replay(t, r);
  EXPECT_EQ(m.peak_live_bytes, 1000u);
  EXPECT_DOUBLE_EQ(m.trace_seconds, static_cast<double>(end) * 1e-6);
  EXPECT_EQ(r.times, (std::vector<std::int64_t>{0, end / 1000 * 1000}));
}

TEST(Replay, RecordedSegmentsOfUpTo2To64BytesAddUpWithoutOverflow) {
  using a = trace_action;
  constexpr std::uint64_t big = (std::uint64_t{1} << 63) - 1;
  trace t;
  t.events = {{0, 0x1, big, 0, a::segment_alloc}, {1, 0x2, big, 0, a::segment_alloc}};
  ASSERT_TRUE(recorded_peak_reserved(t).has_value());
  EXPECT_EQ(*recorded_peak_reserved(t), 2 * big);  // 2^64 - 2: still a size
  t.events.push_back({2, 0x3, ~std::uint64_t{0}, 0, a::segment_alloc});
  EXPECT_EQ(*recorded_peak_reserved(t), ~std::size_t{0});  // past 2^64 - 1: saturated
  t.events = {{0, 0x1, big, 0, a::segment_alloc}, {1, 0x1, big, 0, a::segment_free}, {2, 0x2, 512, 0, a::segment_alloc}};
  EXPECT_EQ(*recorded_peak_reserved(t), big);
}

// Three 100 MiB blocks: within 10 ms of each other the third makes 300 MiB of growth, a burst (256 MiB), and
// gets handles of up to 64 MiB (64 + 36); the first two, and all three when 20 ms apart, get 8 MiB handles
// (12 x 8 + 4 each). 13 + 13 + 2 = 28 handles against 39.
TEST(Replay, ThePoolMakesLargeHandlesOnlyForABurstInTraceTime) {
  for (const auto& [gap_us, handles] : {std::pair{1000, 28u}, std::pair{20'000, 39u}}) {
    trace t;
    t.name = "three";
    for (int i = 0; i < 3; ++i)
      t.events.push_back({i * gap_us, 0x1000u + static_cast<std::uint64_t>(i), 100 * MiB, 0, trace_action::alloc});
    sim_device dev(quiet());
    pool_resource pool(dev, pool_options{});
    const replay_result r = replay(t, pool);
    EXPECT_EQ(r.device_calls.calls(device_call::mem_create), handles) << gap_us;
    EXPECT_EQ(pool.stats().arena.burst_growths, gap_us == 1000 ? 1u : 0u) << gap_us;
    EXPECT_EQ(r.peak_reserved_bytes, 300 * MiB) << gap_us;
    // The pool's own counters come with the result: three growths, each handle made and mapped once.
    const auto counter = [&](std::string_view name) -> std::uint64_t {
      for (const auto& [n, v] : r.allocator_counters)
        if (n == name) return v;
      ADD_FAILURE() << "no counter " << name;
      return 0;
    };
    EXPECT_EQ(counter("growths"), 3u) << gap_us;
    EXPECT_EQ(counter("burst_growths"), gap_us == 1000 ? 1u : 0u) << gap_us;
    EXPECT_EQ(counter("handles_created"), handles) << gap_us;
    EXPECT_EQ(counter("handles_mapped"), handles) << gap_us;
    EXPECT_EQ(counter("handles_unmapped"), 0u) << gap_us;
    EXPECT_EQ(counter("aliases_mapped"), 0u) << gap_us;
  }
}

// Warm-up ends at the row where live bytes first reach their peak: here the second (6 MiB live at 10 us);
// the fourth row comes back to 6 MiB and is not a new peak. Under cuda-direct each alloc is one cudaMalloc,
// so the warm-up holds the first two (2 and 4 MiB) and the rest of the driver time is the third cudaMalloc
// and the three cudaFrees.
TEST(Replay, WarmUpIsTheDriverTimeUpToTheFirstPeakOfLiveBytes) {
  using a = trace_action;
  trace t;
  t.name = "warm";
  t.events = {{0, 0xA, 2 * MiB, 0, a::alloc},          {10, 0xB, 4 * MiB, 0, a::alloc},
              {20, 0xA, 2 * MiB, 0, a::free_requested}, {30, 0xC, 2 * MiB, 0, a::alloc},
              {40, 0xB, 4 * MiB, 0, a::free_requested}, {50, 0xC, 2 * MiB, 0, a::free_requested}};
  sim_device dev;  // the H200's costs
  cuda_direct_resource r(dev);
  const replay_result m = replay(t, r);
  const cost_model c = cost_model::h200();
  const std::uint64_t malloc2 = c.cost(device_call::legacy_malloc, 2 * MiB);
  const std::uint64_t malloc4 = c.cost(device_call::legacy_malloc, 4 * MiB);
  ASSERT_GT(malloc2, 0u);
  EXPECT_EQ(m.peak_live_bytes, 6 * MiB);
  EXPECT_DOUBLE_EQ(m.warmup_trace_seconds, 10e-6);
  EXPECT_NEAR(m.warmup_driver_seconds, static_cast<double>(malloc2 + malloc4) * 1e-9, 1e-12);
  const std::uint64_t frees = 2 * c.cost(device_call::legacy_free, 2 * MiB) + c.cost(device_call::legacy_free, 4 * MiB);
  EXPECT_EQ(m.device_calls.calls(device_call::legacy_malloc), 3u);
  EXPECT_TRUE(m.allocator_counters.empty());  // cuda-direct counts nothing of its own
  EXPECT_NEAR(m.modelled_driver_seconds - m.warmup_driver_seconds, static_cast<double>(malloc2 + frees) * 1e-9, 1e-12);
}

// The replay's own queries of the device (at the first failure, and at each peak of reserved) are not the
// allocator's calls: on an 8 MiB device a 10 MiB cudaMalloc fails, then 2 and 4 MiB succeed; the calls are
// the three cudaMallocs (the failed one costs as much as any) and the two cudaFrees, and nothing else.
TEST(Replay, TheReplaysOwnQueriesAreNotCountedAsTheAllocators) {
  using a = trace_action;
  trace t;
  t.events = {{0, 0xA, 10 * MiB, 0, a::alloc},         {10, 0xB, 2 * MiB, 0, a::alloc},
              {20, 0xC, 4 * MiB, 0, a::alloc},          {30, 0xB, 2 * MiB, 0, a::free_requested},
              {40, 0xC, 4 * MiB, 0, a::free_requested}};
  sim_device_options o;
  o.capacity = 8 * MiB;
  sim_device dev(o);
  cuda_direct_resource r(dev);
  const replay_result m = replay(t, r);
  EXPECT_EQ(m.failed_allocations, 1u);
  EXPECT_EQ(m.device_calls.total_calls(), 5u);
  EXPECT_EQ(m.device_calls.calls(device_call::mem_get_info), 0u);
  const cost_model c = cost_model::h200();
  const std::uint64_t mallocs = c.cost(device_call::legacy_malloc, 10 * MiB) + c.cost(device_call::legacy_malloc, 2 * MiB) +
                                c.cost(device_call::legacy_malloc, 4 * MiB);
  EXPECT_NEAR(m.warmup_driver_seconds, static_cast<double>(mallocs) * 1e-9, 1e-12);
}

TEST(Replay, CountsAFailedAllocationAndSkipsItsFree) {
  sim_device dev(quiet());
  exact_resource r(dev, 3584);  // A (1024) + B (3072) = 4096 does not fit
  const replay_result m = replay(hand_trace(), r);
  EXPECT_EQ(m.failed_allocations, 1u);
  ASSERT_TRUE(m.first_failure_event.has_value());
  EXPECT_EQ(*m.first_failure_event, 1u);
  EXPECT_DOUBLE_EQ(m.first_failure_time_s, 10e-6);
  EXPECT_EQ(m.unmatched_frees, 1u);  // only 0xF00: B's free is skipped because B failed
  EXPECT_EQ(m.peak_live_bytes, 1000u);
  EXPECT_EQ(m.events, 9u);
}

TEST(Replay, StopsAtTheFirstFailureWhenAsked) {
  sim_device dev(quiet());
  exact_resource r(dev, 3584);
  const replay_result m = replay(hand_trace(), r, {.stop_at_first_failure = true});
  EXPECT_EQ(m.failed_allocations, 1u);
  EXPECT_EQ(m.events, 2u);
}

TEST(Replay, RecordedPeakIsNoneWithoutSegmentRows) {
  trace t = hand_trace();
  t.events.resize(7);
  EXPECT_FALSE(recorded_peak_reserved(t).has_value());
  // Segment rows: +20 MiB, +2 MiB, -20 MiB, +4 MiB (map): the running sum peaks at 22 MiB.
  using a = trace_action;
  t.events.push_back({200, 1, 20 * MiB, 0, a::segment_alloc});
  t.events.push_back({201, 2, 2 * MiB, 0, a::segment_alloc});
  t.events.push_back({202, 1, 20 * MiB, 0, a::segment_free});
  t.events.push_back({203, 3, 4 * MiB, 0, a::segment_map});
  EXPECT_EQ(recorded_peak_reserved(t), std::optional<std::size_t>(22 * MiB));
}

TEST(Replay, AnAllocAtALiveAddressFreesTheOldBlockAndCountsIt) {
  using a = trace_action;
  trace t;
  t.events = {{0, 0xA, 1024, 0, a::alloc}, {1, 0xA, 2048, 0, a::alloc}, {2, 0xA, 2048, 0, a::free_requested}};
  sim_device dev(quiet());
  exact_resource r(dev, 1 * GiB);
  const replay_result m = replay(t, r);
  EXPECT_EQ(m.unmatched_frees, 1u);
  EXPECT_EQ(m.peak_live_bytes, 2048u);
  EXPECT_EQ(m.final_reserved_bytes, 0u);
}

}  // namespace
}  // namespace vram
