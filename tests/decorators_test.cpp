// The decorators over real resources on a simulated device: what each counts, refuses or writes, worked out
// by hand, and that each keeps the resource contract (allocate(0), bad frees, out-of-memory messages).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/decorators/limit_resource.hpp"
#include "vram/decorators/statistics_resource.hpp"
#include "vram/decorators/thread_safe_resource.hpp"
#include "vram/decorators/tracing_resource.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/policies/registry.hpp"
#include "vram/trace/trace_io.hpp"

namespace vram {
namespace {

sim_device_options small(std::size_t capacity = 64 * MiB) {
  sim_device_options o;
  o.capacity = capacity;
  return o;
}

TEST(StatisticsResource, CountsRequestedBytesBlocksAndFailures) {
  sim_device dev(small());
  auto up = make_resource("cuda-direct", dev);
  statistics_resource r(*up);
  const device_ptr a = r.allocate(1000);
  const device_ptr b = r.allocate(3 * MiB, 7);
  EXPECT_EQ(r.statistics().allocations, 2u);
  EXPECT_EQ(r.statistics().live_bytes, 1000 + 3 * MiB);  // requested, not rounded
  EXPECT_EQ(r.statistics().live_blocks, 2u);
  r.deallocate(a, 1000);
  EXPECT_EQ(r.statistics().frees, 1u);
  EXPECT_EQ(r.statistics().live_bytes, 3 * MiB);
  EXPECT_EQ(r.statistics().peak_live_bytes, 1000 + 3 * MiB);
  EXPECT_EQ(r.statistics().peak_live_blocks, 2u);
  // 64 MiB cannot be had on a 64 MiB device with 4 MiB in use (3 MiB rounds to two 2 MiB pages).
  EXPECT_EQ(r.try_allocate(64 * MiB), 0u);
  EXPECT_THROW(r.allocate(64 * MiB), out_of_memory);
  EXPECT_EQ(r.statistics().failed_allocations, 2u);
  EXPECT_EQ(r.statistics().allocations, 2u);
  // A bad free is the upstream's to refuse, and counts as nothing.
  EXPECT_THROW(r.deallocate(a, 1000), usage_error);
  EXPECT_EQ(r.statistics().frees, 1u);
  r.reset_peaks();
  EXPECT_EQ(r.statistics().peak_live_bytes, 3 * MiB);
  r.deallocate(b, 3 * MiB, 7);
  EXPECT_EQ(r.statistics().live_bytes, 0u);
  EXPECT_EQ(r.statistics().live_blocks, 0u);
  // The figures of the resource are the upstream's.
  EXPECT_EQ(r.name(), "cuda-direct");
  EXPECT_EQ(r.reserved_bytes(), up->reserved_bytes());
  EXPECT_EQ(r.allocate(0), 0u);
}

TEST(LimitResource, RefusesPastTheLimitInBlocksRoundedTo512) {
  sim_device dev(small());
  auto up = make_resource("vram", dev);
  limit_resource r(*up, 4 * MiB);
  const device_ptr a = r.allocate(3 * MiB);
  EXPECT_EQ(r.used(), 3 * MiB);
  const device_ptr b = r.allocate(1000);  // charged 1024
  EXPECT_EQ(r.used(), 3 * MiB + 1024);
  // 1 MiB - 1024 bytes are left under the limit: 1 MiB more is refused, though the device has room.
  EXPECT_EQ(r.try_allocate(1 * MiB), 0u);
  try {
    r.allocate(1 * MiB);
    FAIL() << "allocate past the limit returned";
  } catch (const out_of_memory& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("limit of 4.00 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("3.00 MiB are live"), std::string::npos) << what;
  }
  const device_ptr c = r.allocate(1 * MiB - 1024);  // exactly to the limit
  EXPECT_EQ(r.used(), 4 * MiB);
  EXPECT_THROW(r.deallocate(a, 2 * MiB), usage_error);  // a wrong size: refused upstream, nothing uncharged
  EXPECT_EQ(r.used(), 4 * MiB);
  r.deallocate(a, 3 * MiB);
  EXPECT_EQ(r.used(), 1 * MiB);
  const device_ptr d = r.allocate(2 * MiB);
  EXPECT_NE(d, 0u);
  for (auto [p, n] : {std::pair{b, std::size_t{1000}}, {c, 1 * MiB - 1024}, {d, 2 * MiB}}) r.deallocate(p, n);
  EXPECT_EQ(r.used(), 0u);
  r.validate();
}

TEST(LimitResource, AnUpstreamOutOfMemoryKeepsTheUpstreamsMessage) {
  sim_device dev(small(8 * MiB));
  auto up = make_resource("cuda-direct", dev);
  limit_resource r(*up, 1 * GiB);  // the device, not the limit, is what runs out
  try {
    r.allocate(16 * MiB);
    FAIL();
  } catch (const out_of_memory& e) {
    EXPECT_EQ(std::string(e.what()), up->explain_out_of_memory(16 * MiB, 0));
  }
}

TEST(ThreadSafeResource, PassesEverythingThrough) {
  sim_device dev(small());
  auto up = make_resource("torch-native", dev);
  thread_safe_resource r(*up);
  const device_ptr a = r.allocate(5 * MiB, 3);
  EXPECT_EQ(r.allocated_bytes(), up->allocated_bytes());
  EXPECT_EQ(r.reserved_bytes(), 20 * MiB);  // torch-native's segment for a 5 MiB block: 20 MiB
  r.record_stream(a, 4);
  r.deallocate(a, 5 * MiB, 3);
  EXPECT_THROW(r.deallocate(a, 5 * MiB, 3), usage_error);
  r.release_cached();
  EXPECT_EQ(r.reserved_bytes(), 0u);
  r.validate();
}

TEST(TracingResource, WritesATraceThatReplaysToWhatWasHeld) {
  const auto dir = std::filesystem::temp_directory_path() / ("vram_tracing_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "run.vram").string();
  sim_device dev(small(16 * MiB));
  auto up = make_resource("cuda-direct", dev);
  {
    trace_recorder rec(path);
    tracing_resource r(*up, rec);
    dev.set_time(1'000'000'000);  // 1 s
    const device_ptr a = r.allocate(4 * MiB, 2);
    dev.set_time(1'500'000'000);
    const device_ptr b = r.allocate(1000);
    EXPECT_EQ(r.try_allocate(64 * MiB), 0u);  // recorded as oom
    EXPECT_THROW(r.deallocate(b, 5000), usage_error);  // refused upstream: not recorded
    dev.set_time(2'000'000'000);
    r.deallocate(a, 4 * MiB, 2);
    r.deallocate(b, 1000);
    rec.flush();
    const auto traces = read_traces(path);
    ASSERT_EQ(traces.size(), 1u);
    const auto& ev = traces[0].events;
    ASSERT_EQ(ev.size(), 5u);
    EXPECT_EQ(ev[0].action, trace_action::alloc);
    EXPECT_EQ(ev[0].time_us, 1'000'000);
    EXPECT_EQ(ev[0].addr, a);
    EXPECT_EQ(ev[0].size, 4 * MiB);
    EXPECT_EQ(ev[0].stream, 2u);
    EXPECT_EQ(ev[1].action, trace_action::alloc);
    EXPECT_EQ(ev[1].time_us, 1'500'000);
    EXPECT_EQ(ev[1].size, 1000u);
    EXPECT_EQ(ev[2].action, trace_action::oom);
    EXPECT_EQ(ev[2].size, 64 * MiB);
    EXPECT_EQ(ev[3].action, trace_action::free_requested);
    EXPECT_EQ(ev[3].addr, a);
    EXPECT_EQ(ev[3].time_us, 2'000'000);
    EXPECT_EQ(ev[4].action, trace_action::free_requested);
    EXPECT_EQ(ev[4].addr, b);
  }
  std::filesystem::remove_all(dir);
}

TEST(Decorators, Stack) {
  // A limit over statistics over vram's pool: each layer sees what passes through it.
  sim_device dev(small());
  auto pool = make_resource("vram", dev);
  statistics_resource stats(*pool);
  limit_resource limit(stats, 2 * MiB);
  const device_ptr a = limit.allocate(1 * MiB);
  EXPECT_EQ(limit.try_allocate(1 * MiB + 1), 0u);  // refused by the limit: statistics never sees it
  EXPECT_EQ(stats.statistics().failed_allocations, 0u);
  EXPECT_EQ(stats.statistics().allocations, 1u);
  limit.deallocate(a, 1 * MiB);
  EXPECT_EQ(stats.statistics().frees, 1u);
  EXPECT_EQ(limit.name(), "vram");
}

}  // namespace
}  // namespace vram
