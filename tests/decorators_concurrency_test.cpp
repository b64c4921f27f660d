// thread_safe_resource under threads (run under ThreadSanitizer in CI): eight threads allocate and free
// through one mutex around torch-native, which is not thread-safe itself, and a statistics_resource under
// the mutex counts every call exactly.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "vram/core/size.hpp"
#include "vram/decorators/statistics_resource.hpp"
#include "vram/decorators/thread_safe_resource.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/policies/registry.hpp"

namespace vram {
namespace {

TEST(ThreadSafeResourceConcurrency, EightThreadsThroughOneMutex) {
  sim_device dev;
  auto torch = make_resource("torch-native", dev);
  statistics_resource stats(*torch);
  thread_safe_resource r(stats);
  constexpr int threads = 8, rounds = 2000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&r, t] {
      std::vector<std::pair<device_ptr, std::size_t>> mine;
      for (int i = 0; i < rounds; ++i) {
        const std::size_t bytes = static_cast<std::size_t>(512 * (1 + (i * 7 + t) % 64));
        mine.emplace_back(r.allocate(bytes, static_cast<stream_id>(t)), bytes);
        if (i % 3 == 2) {
          for (auto [p, n] : mine) r.deallocate(p, n, static_cast<stream_id>(t));
          mine.clear();
        }
      }
      for (auto [p, n] : mine) r.deallocate(p, n, static_cast<stream_id>(t));
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(stats.statistics().allocations, static_cast<std::uint64_t>(threads * rounds));
  EXPECT_EQ(stats.statistics().frees, static_cast<std::uint64_t>(threads * rounds));
  EXPECT_EQ(stats.statistics().live_bytes, 0u);
  EXPECT_EQ(r.allocated_bytes(), 0u);
  r.validate();
}

}  // namespace
}  // namespace vram
