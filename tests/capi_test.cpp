// The C API (include/vram/vram.h) on simulated devices of 64 MiB: VRAM_DEVICE=sim:64MiB is set before the
// first call, so the process has 8 devices of 64 MiB (32 granules of 2 MiB each). Pools live as long as the
// process, so each test that needs absolute figures has a device of its own:
//   0 general, 1 and 2 wrong-device frees, 3 and 4 separate pools, 5 out of memory, 6 limit, 7 trim.
// Every test frees what it allocates. Sizes: a block is rounded up to 512 bytes, so 1000 -> 1024.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vram/capi/pool_table.hpp"
#include "vram/core/error.hpp"
#include "vram/device/cuda_driver.hpp"
#include "vram/vram.h"

namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::testing::EndsWith;

// Runs before main, so before any call reads VRAM_DEVICE; the pool's own settings are left at their defaults.
const bool environment_set = [] {
  setenv("VRAM_DEVICE", "sim:64MiB", 1);
  for (const char* v : {"VRAM_LIMIT", "VRAM_MAX_CACHED_RATIO", "VRAM_MAX_HANDLE", "VRAM_THREAD_CACHE",
                        "VRAM_THREAD_CACHE_BYTES"}) {
    unsetenv(v);
  }
  return true;
}();

constexpr std::size_t MiB = std::size_t{1} << 20;

vram_stats stats_of(int device) {
  vram_stats s{};
  EXPECT_EQ(vram_get_stats(device, &s), VRAM_SUCCESS) << vram_last_error();
  return s;
}

auto fields(const vram_stats& s) {
  return std::tuple(s.requested_bytes, s.allocated_bytes, s.peak_allocated_bytes, s.reserved_bytes,
                    s.peak_reserved_bytes, s.cached_bytes, s.thread_cached_bytes, s.pending_bytes, s.mapped_bytes,
                    s.allocations, s.frees, s.failed_allocations);
}

std::string text(const void* p) { return fmt::format("{}", p); }

void* stream(std::uintptr_t id) { return reinterpret_cast<void*>(id); }

// ---- devices ----------------------------------------------------------------------------------------------

TEST(capi, counts_eight_simulated_devices_of_64_mib) {
  ASSERT_TRUE(environment_set);
  EXPECT_EQ(vram_device_count(), 8);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
  // sim:64MiB labels its devices "simulated device", numbered by index.
  EXPECT_STREQ(vram_device_name(0), "simulated device #0 (64 MiB, 2 MiB granules)");
  EXPECT_STREQ(vram_device_name(7), "simulated device #7 (64 MiB, 2 MiB granules)");
}

TEST(capi, a_bad_device_index_is_an_error_that_names_the_range) {
  for (int device : {-1, 8, 1000}) {
    SCOPED_TRACE(device);
    EXPECT_EQ(vram_malloc(1000, device, nullptr), nullptr);
    EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_INVALID_ARGUMENT);
    EXPECT_THAT(vram_last_error(), HasSubstr(fmt::format("vram_malloc(size=1000, device={}, stream=0x0)", device)));
    EXPECT_THAT(vram_last_error(), HasSubstr(fmt::format("device {} is out of range", device)));
    EXPECT_THAT(vram_last_error(), HasSubstr("8 simulated devices (0 to 7)"));
    EXPECT_EQ(vram_device_name(device), nullptr);
    EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_INVALID_ARGUMENT);
    vram_stats s{};
    EXPECT_EQ(vram_get_stats(device, &s), VRAM_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(vram_trim(device, nullptr), VRAM_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(vram_set_limit(device, MiB), VRAM_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(vram_snapshot_json(device), nullptr);
    EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_INVALID_ARGUMENT);
  }
  // Even a zero-size request names a bad device.
  EXPECT_EQ(vram_malloc(0, 8, nullptr), nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_INVALID_ARGUMENT);
}

// ---- malloc and free --------------------------------------------------------------------------------------

TEST(capi, malloc_and_free_round_trip) {
  const vram_stats before = stats_of(0);
  void* p = vram_malloc(1000, 0, nullptr);
  ASSERT_NE(p, nullptr) << vram_last_error();
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
  const vram_stats during = stats_of(0);
  EXPECT_EQ(during.requested_bytes, before.requested_bytes + 1000);
  EXPECT_EQ(during.allocated_bytes, before.allocated_bytes + 1024);  // 1000 rounded up to 2 x 512
  EXPECT_EQ(during.allocations, before.allocations + 1);
  EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
  EXPECT_EQ(during.reserved_bytes % (2 * MiB), 0u);  // physical memory comes in 2 MiB granules

  vram_free(p, 1000, 0, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
  const vram_stats after = stats_of(0);
  EXPECT_EQ(after.requested_bytes, before.requested_bytes);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.frees, before.frees + 1);
}

TEST(capi, blocks_are_aligned_to_512_bytes_and_do_not_overlap) {
  const std::vector<std::size_t> sizes{1, 511, 512, 513, 4097, MiB + 1, 3 * MiB + 7};
  std::vector<void*> blocks;
  for (std::size_t size : sizes) {
    void* p = vram_malloc(static_cast<ssize_t>(size), 0, nullptr);
    ASSERT_NE(p, nullptr) << vram_last_error();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 512, 0u) << size;
    blocks.push_back(p);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    for (std::size_t j = 0; j < blocks.size(); ++j) {
      if (i == j) continue;
      const auto a = reinterpret_cast<std::uintptr_t>(blocks[i]);
      const auto b = reinterpret_cast<std::uintptr_t>(blocks[j]);
      EXPECT_TRUE(a + sizes[i] <= b || b + sizes[j] <= a) << "blocks " << i << " and " << j << " overlap";
    }
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) vram_free(blocks[i], static_cast<ssize_t>(sizes[i]), 0, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
}

TEST(capi, zero_size_gives_null_and_no_error) {
  EXPECT_EQ(vram_malloc(-1, 0, nullptr), nullptr);  // leaves a failure behind...
  ASSERT_EQ(vram_last_error_code(), VRAM_ERROR_INVALID_ARGUMENT);
  const vram_stats before = stats_of(0);
  EXPECT_EQ(vram_malloc(0, 0, nullptr), nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);  // ...which a success clears
  vram_free(nullptr, 0, 0, nullptr);                // freeing NULL does nothing, as cudaFree(NULL)
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
  EXPECT_EQ(fields(stats_of(0)), fields(before));
}

TEST(capi, a_negative_size_is_an_error_that_names_the_size) {
  const vram_stats before = stats_of(0);
  EXPECT_EQ(vram_malloc(-4096, 0, nullptr), nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), StartsWith("vram_malloc(size=-4096, device=0, stream=0x0): size -4096 is negative"));
  EXPECT_EQ(fields(stats_of(0)), fields(before));

  void* p = vram_malloc(1000, 0, nullptr);
  ASSERT_NE(p, nullptr);
  vram_free(p, -1, 0, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), HasSubstr("size -1 is negative"));
  vram_free(p, 1000, 0, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
}

// ---- bad frees: each sets the error and leaves the pool as it was -----------------------------------------

TEST(capi, freeing_a_pointer_the_pool_never_handed_out_is_an_error) {
  void* live = vram_malloc(1000, 0, nullptr);
  ASSERT_NE(live, nullptr);
  const vram_stats before = stats_of(0);
  // 0x1000 lies below any device address; live + 512 lies inside a live block, not at its start.
  for (void* bogus : {stream(0x1000), static_cast<void*>(static_cast<char*>(live) + 512)}) {
    SCOPED_TRACE(text(bogus));
    vram_free(bogus, 512, 0, nullptr);
    EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_INVALID_ARGUMENT);
    EXPECT_THAT(vram_last_error(), StartsWith(fmt::format("vram_free(ptr={}, size=512, device=0, stream=0x0): ", bogus)));
    EXPECT_EQ(fields(stats_of(0)), fields(before));
  }
  vram_free(live, 1000, 0, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
}

TEST(capi, a_double_free_is_an_error) {
  void* p = vram_malloc(1000, 0, nullptr);
  ASSERT_NE(p, nullptr);
  vram_free(p, 1000, 0, nullptr);
  ASSERT_EQ(vram_last_error_code(), VRAM_SUCCESS);
  const vram_stats before = stats_of(0);
  vram_free(p, 1000, 0, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), StartsWith(fmt::format("vram_free(ptr={}, size=1000, device=0, stream=0x0): ", p)));
  EXPECT_THAT(vram_last_error(), HasSubstr("double free"));
  EXPECT_EQ(fields(stats_of(0)), fields(before));
}

TEST(capi, a_free_with_the_wrong_size_is_an_error) {
  void* p = vram_malloc(1000, 0, nullptr);
  ASSERT_NE(p, nullptr);
  const vram_stats before = stats_of(0);
  vram_free(p, 2000, 0, nullptr);  // 2000 rounds to 2048, the block holds 1024
  EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), StartsWith(fmt::format("vram_free(ptr={}, size=2000, device=0, stream=0x0): ", p)));
  EXPECT_THAT(vram_last_error(), HasSubstr("1024"));
  EXPECT_EQ(fields(stats_of(0)), fields(before));
  vram_free(p, 1000, 0, nullptr);  // the block is still live and frees with its own size
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
}

TEST(capi, a_free_on_the_wrong_device_is_an_error) {
  void* p = vram_malloc(1000, 1, nullptr);
  ASSERT_NE(p, nullptr);
  const vram_stats before1 = stats_of(1);
  const vram_stats before2 = stats_of(2);  // device 2 holds no block (see the note in pool_table.hpp)
  vram_free(p, 1000, 2, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), StartsWith(fmt::format("vram_free(ptr={}, size=1000, device=2, stream=0x0): ", p)));
  EXPECT_EQ(fields(stats_of(1)), fields(before1));
  EXPECT_EQ(fields(stats_of(2)), fields(before2));
  vram_free(p, 1000, 1, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
}

// ---- memory limits ----------------------------------------------------------------------------------------

TEST(capi, out_of_memory_on_a_64_mib_device_names_the_request) {
  const vram_stats before = stats_of(5);
  EXPECT_EQ(vram_malloc(static_cast<ssize_t>(128 * MiB), 5, nullptr), nullptr);  // 128 MiB > 64 MiB
  EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_OUT_OF_MEMORY);
  EXPECT_THAT(vram_last_error(), StartsWith("vram_malloc(size=134217728, device=5, stream=0x0): "));  // 128 x 2^20
  EXPECT_THAT(vram_last_error(), HasSubstr("out of memory"));
  EXPECT_THAT(vram_last_error(), HasSubstr("128.00 MiB"));
  const vram_stats after = stats_of(5);
  EXPECT_EQ(after.failed_allocations, before.failed_allocations + 1);
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);

  // The pool still serves what fits: 16 MiB of 64.
  void* p = vram_malloc(static_cast<ssize_t>(16 * MiB), 5, nullptr);
  ASSERT_NE(p, nullptr) << vram_last_error();
  vram_free(p, static_cast<ssize_t>(16 * MiB), 5, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
}

TEST(capi, a_limit_refuses_what_would_pass_it) {
  std::size_t limit = 1;
  ASSERT_EQ(vram_get_limit(6, &limit), VRAM_SUCCESS);
  EXPECT_EQ(limit, 0u);  // no limit unless set
  ASSERT_EQ(vram_set_limit(6, 8 * MiB), VRAM_SUCCESS);
  ASSERT_EQ(vram_get_limit(6, &limit), VRAM_SUCCESS);
  EXPECT_EQ(limit, 8 * MiB);

  EXPECT_EQ(vram_malloc(static_cast<ssize_t>(16 * MiB), 6, nullptr), nullptr);  // 16 MiB > the 8 MiB limit
  EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_OUT_OF_MEMORY);
  EXPECT_THAT(vram_last_error(), StartsWith("vram_malloc(size=16777216, device=6, stream=0x0): "));
  void* p = vram_malloc(static_cast<ssize_t>(4 * MiB), 6, nullptr);  // 4 MiB fits under 8
  ASSERT_NE(p, nullptr) << vram_last_error();
  EXPECT_LE(stats_of(6).reserved_bytes, 8 * MiB);
  vram_free(p, static_cast<ssize_t>(4 * MiB), 6, nullptr);

  ASSERT_EQ(vram_set_limit(6, 0), VRAM_SUCCESS);  // lifted: 16 MiB fits the 64 MiB device
  p = vram_malloc(static_cast<ssize_t>(16 * MiB), 6, nullptr);
  ASSERT_NE(p, nullptr) << vram_last_error();
  vram_free(p, static_cast<ssize_t>(16 * MiB), 6, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
}

TEST(capi, trim_gives_back_all_cached_memory) {
  const std::vector<std::size_t> sizes{1000, 3 * MiB, 10 * MiB};
  std::vector<void*> blocks;
  for (std::size_t size : sizes) blocks.push_back(vram_malloc(static_cast<ssize_t>(size), 7, nullptr));
  for (void* p : blocks) ASSERT_NE(p, nullptr);
  // Live: 1024 + 3 MiB + 10 MiB rounded; all of it is allocated and some granules back it.
  EXPECT_EQ(stats_of(7).allocated_bytes, 1024 + 13 * MiB);
  for (std::size_t i = 0; i < blocks.size(); ++i) vram_free(blocks[i], static_cast<ssize_t>(sizes[i]), 7, nullptr);

  const vram_stats cached = stats_of(7);
  EXPECT_EQ(cached.allocated_bytes, 0u);
  EXPECT_EQ(cached.requested_bytes, 0u);
  // At least the 1024-byte block's 2 MiB granule (small blocks have a zone of their own) and the 13 MiB of
  // large blocks in 14 MiB of granules: 16 MiB, all held still...
  EXPECT_GE(cached.reserved_bytes, 16 * MiB);
  EXPECT_EQ(cached.cached_bytes, cached.reserved_bytes);  // ...and now none of it in a live block

  std::size_t released = 0;
  ASSERT_EQ(vram_trim(7, &released), VRAM_SUCCESS);
  EXPECT_EQ(released, cached.reserved_bytes);
  const vram_stats trimmed = stats_of(7);
  EXPECT_EQ(trimmed.reserved_bytes, 0u);
  EXPECT_EQ(trimmed.cached_bytes, 0u);
  EXPECT_EQ(trimmed.peak_reserved_bytes, cached.peak_reserved_bytes);

  ASSERT_EQ(vram_trim(7, nullptr), VRAM_SUCCESS);  // nothing more to give; released may be NULL
  EXPECT_EQ(stats_of(7).reserved_bytes, 0u);
}

// ---- statistics, snapshot, separate pools ----------------------------------------------------------------

TEST(capi, stats_and_snapshot_hold_the_pools_figures) {
  void* p = vram_malloc(1000, 0, nullptr);
  ASSERT_NE(p, nullptr);
  const vram_stats s = stats_of(0);
  char* json = vram_snapshot_json(0);
  ASSERT_NE(json, nullptr) << vram_last_error();
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
  const auto snapshot = nlohmann::json::parse(json);
  vram_free_string(json);

  EXPECT_EQ(snapshot.at("policy"), "vram");
  EXPECT_EQ(snapshot.at("device"), vram_device_name(0));
  EXPECT_EQ(snapshot.at("reserved_bytes").get<std::size_t>(), s.reserved_bytes);
  EXPECT_EQ(snapshot.at("granularity").get<std::size_t>(), 2 * MiB);
  int found = 0;
  for (const auto& block : snapshot.at("blocks")) {
    if (block.at("address").get<std::uint64_t>() == reinterpret_cast<std::uintptr_t>(p)) {
      ++found;
      EXPECT_EQ(block.at("bytes").get<std::size_t>(), 1024u);
      EXPECT_EQ(block.at("state"), "live");
    }
  }
  EXPECT_EQ(found, 1);
  vram_free(p, 1000, 0, nullptr);
  vram_free_string(nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
}

TEST(capi, null_outputs_are_errors) {
  EXPECT_EQ(vram_get_stats(0, nullptr), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), StartsWith("vram_get_stats(device=0): out is NULL"));
  EXPECT_EQ(vram_get_limit(0, nullptr), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), StartsWith("vram_get_limit(device=0): bytes is NULL"));
  EXPECT_EQ(vram_record_stream(nullptr, 0, nullptr), VRAM_ERROR_INVALID_ARGUMENT);
}

TEST(capi, a_sized_read_of_the_stats_writes_the_callers_bytes_and_no_more) {
  const vram_stats before = stats_of(6);
  void* p = vram_malloc(1000, 6, nullptr);
  ASSERT_NE(p, nullptr) << vram_last_error();
  vram_stats whole{};
  ASSERT_EQ(vram_get_stats(6, &whole), VRAM_SUCCESS);
  EXPECT_EQ(whole.allocations, before.allocations + 1);
  EXPECT_EQ(whole.allocated_bytes, before.allocated_bytes + 1024);  // 1000 rounded up to 512 bytes
  static_assert(sizeof(vram_stats) == 136, "version 2: 9 size_t and 8 uint64_t");
  static_assert(offsetof(vram_stats, alloc_retries) == 96, "version 1 ended after failed_allocations");

  // An older caller's structure (version 1, 96 bytes): its bytes and not one past them.
  std::array<unsigned char, 160> buf{};
  buf.fill(0xAB);
  ASSERT_EQ(vram_get_stats_sized(6, buf.data(), 96), VRAM_SUCCESS) << vram_last_error();
  EXPECT_EQ(std::memcmp(buf.data(), &whole, 96), 0);
  for (std::size_t i = 96; i < buf.size(); ++i) ASSERT_EQ(buf[i], 0xAB) << "byte " << i;

  // The same size: the whole structure.
  buf.fill(0xAB);
  ASSERT_EQ(vram_get_stats_sized(6, buf.data(), sizeof(vram_stats)), VRAM_SUCCESS);
  EXPECT_EQ(std::memcmp(buf.data(), &whole, sizeof whole), 0);
  EXPECT_EQ(buf[sizeof(vram_stats)], 0xAB);

  // A newer caller's, 16 bytes longer: all this library knows, then zeros up to its size.
  buf.fill(0xAB);
  ASSERT_EQ(vram_get_stats_sized(6, buf.data(), sizeof(vram_stats) + 16), VRAM_SUCCESS);
  EXPECT_EQ(std::memcmp(buf.data(), &whole, sizeof whole), 0);
  for (std::size_t i = sizeof(vram_stats); i < sizeof(vram_stats) + 16; ++i) ASSERT_EQ(buf[i], 0) << "byte " << i;
  EXPECT_EQ(buf[sizeof(vram_stats) + 16], 0xAB);

  // Too small for one field, or nowhere to write: refused, nothing written.
  buf.fill(0xAB);
  EXPECT_EQ(vram_get_stats_sized(6, buf.data(), 4), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), StartsWith("vram_get_stats_sized(device=6, size=4): size is 4: at least 8"));
  EXPECT_EQ(buf[0], 0xAB);
  EXPECT_EQ(vram_get_stats_sized(6, nullptr, 96), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), StartsWith("vram_get_stats_sized(device=6, size=96): out is NULL"));
  EXPECT_EQ(vram_get_stats_sized(8, buf.data(), 96), VRAM_ERROR_INVALID_ARGUMENT);
  vram_free(p, 1000, 6, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
}

TEST(capi, two_devices_have_separate_pools) {
  const vram_stats before3 = stats_of(3);
  const vram_stats before4 = stats_of(4);
  void* p3 = vram_malloc(static_cast<ssize_t>(MiB), 3, nullptr);
  void* p4 = vram_malloc(static_cast<ssize_t>(2 * MiB), 4, nullptr);
  ASSERT_NE(p3, nullptr);
  ASSERT_NE(p4, nullptr);
  EXPECT_EQ(stats_of(3).allocated_bytes, before3.allocated_bytes + MiB);
  EXPECT_EQ(stats_of(4).allocated_bytes, before4.allocated_bytes + 2 * MiB);
  EXPECT_EQ(stats_of(3).allocations, before3.allocations + 1);
  EXPECT_EQ(stats_of(4).allocations, before4.allocations + 1);

  ASSERT_EQ(vram_set_limit(3, 4 * MiB), VRAM_SUCCESS);
  std::size_t limit4 = 1;
  ASSERT_EQ(vram_get_limit(4, &limit4), VRAM_SUCCESS);
  EXPECT_EQ(limit4, 0u);  // a limit is per device
  ASSERT_EQ(vram_set_limit(3, 0), VRAM_SUCCESS);

  vram_free(p3, static_cast<ssize_t>(MiB), 3, nullptr);
  EXPECT_EQ(stats_of(3).allocated_bytes, before3.allocated_bytes);
  EXPECT_EQ(stats_of(4).allocated_bytes, before4.allocated_bytes + 2 * MiB);  // device 4's block is untouched
  vram_free(p4, static_cast<ssize_t>(2 * MiB), 4, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
  EXPECT_EQ(stats_of(4).allocated_bytes, before4.allocated_bytes);
}

TEST(capi, record_stream_marks_a_live_block) {
  void* p = vram_malloc(1000, 0, stream(0x11));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(vram_record_stream(p, 0, stream(0x22)), VRAM_SUCCESS) << vram_last_error();
  vram_free(p, 1000, 0, stream(0x11));
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS) << vram_last_error();
  EXPECT_EQ(vram_trim(0, nullptr), VRAM_SUCCESS);  // the simulated streams' work is complete: all can go
}

// ---- the error state is per thread; calls from many threads -----------------------------------------------

TEST(capi, the_last_error_belongs_to_the_thread_that_failed) {
  ASSERT_EQ(vram_malloc(0, 0, nullptr), nullptr);
  ASSERT_EQ(vram_last_error_code(), VRAM_SUCCESS);
  const std::string mine = vram_last_error();
  int other_code = -1;
  std::string other_message;
  std::thread t([&] {
    EXPECT_STREQ(vram_last_error(), "");  // a new thread has no failure yet
    vram_malloc(-7, 0, nullptr);
    other_code = vram_last_error_code();
    other_message = vram_last_error();
  });
  t.join();
  EXPECT_EQ(other_code, VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(other_message, HasSubstr("size -7 is negative"));
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);  // this thread's status is its own
  EXPECT_EQ(vram_last_error(), mine);
}

TEST(capi, many_threads_allocate_and_free_on_one_device) {
  constexpr int threads = 4;
  constexpr int rounds = 500;
  const vram_stats before = stats_of(0);
  std::vector<std::thread> pool;
  std::vector<int> failures(threads, 0);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([t, &failures] {
      std::vector<std::pair<void*, ssize_t>> live;
      for (int i = 0; i < rounds; ++i) {
        const ssize_t size = 512 * (1 + (i * 7 + t) % 16);  // 512 B to 8 KiB
        void* p = vram_malloc(size, 0, stream(static_cast<std::uintptr_t>(t)));
        if (p == nullptr) ++failures[t];
        else live.emplace_back(p, size);
        if (live.size() > 8) {
          vram_free(live.front().first, live.front().second, 0, stream(static_cast<std::uintptr_t>(t)));
          if (vram_last_error_code() != VRAM_SUCCESS) ++failures[t];
          live.erase(live.begin());
        }
      }
      for (auto [p, size] : live) vram_free(p, size, 0, stream(static_cast<std::uintptr_t>(t)));
    });
  }
  for (auto& t : pool) t.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  const vram_stats after = stats_of(0);
  EXPECT_EQ(after.allocations, before.allocations + threads * rounds);  // 4 x 500 = 2000
  EXPECT_EQ(after.frees, before.frees + threads * rounds);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.requested_bytes, before.requested_bytes);
  EXPECT_NO_THROW(vram::capi::pool_table::global().validate());
}

// ---- the pool table over other VRAM_DEVICE values ---------------------------------------------------------

TEST(capi_pool_table, a_simulated_device_too_large_is_refused_at_the_count) {
  vram::capi::pool_table table("sim:100TiB");
  try {
    table.device_count();
    FAIL() << "VRAM_DEVICE=sim:100TiB was counted";
  } catch (const vram::usage_error& e) {
    EXPECT_THAT(e.what(), StartsWith("VRAM_DEVICE='sim:100TiB': bad device 'sim:100TiB': a simulated device holds at "
                                     "most 63.00 TiB"));
  }
}

TEST(capi_pool_table, a_malformed_vram_device_is_reported_by_every_call) {
  vram::capi::pool_table table("bogus");
  EXPECT_THROW(
      {
        try {
          table.device_count();
        } catch (const vram::usage_error& e) {
          EXPECT_THAT(e.what(), StartsWith("VRAM_DEVICE='bogus': bad device 'bogus'"));
          // The C API's choices: its device index comes with each call, so no cuda:N among them.
          EXPECT_THAT(e.what(), EndsWith(", or cuda)"));
          throw;
        }
      },
      vram::usage_error);
  EXPECT_THROW(table.pool(0), vram::usage_error);
  EXPECT_NO_THROW(table.validate());
}

TEST(capi_pool_table, cuda_with_an_index_is_refused) {
  vram::capi::pool_table table("cuda:1");
  EXPECT_THROW(
      {
        try {
          table.device_count();
        } catch (const vram::usage_error& e) {
          EXPECT_THAT(e.what(), HasSubstr("the device index comes with each call"));
          throw;
        }
      },
      vram::usage_error);
}

TEST(capi_pool_table, plain_sim_gives_eight_h200s) {
  vram::capi::pool_table table("sim");
  EXPECT_EQ(table.device_count(), 8);
  EXPECT_TRUE(table.simulated());
  EXPECT_EQ(table.device_name(2), "simulated H200 #2 (143771 MiB, 2 MiB granules)");
  const auto p = table.pool(2).allocate(1000);
  EXPECT_EQ(table.existing(2)->allocated_bytes(), 1024u);
  EXPECT_EQ(table.existing(3), nullptr);  // made only when used
  EXPECT_NO_THROW(table.validate());
  table.pool(2).deallocate(p, 1000);
}

TEST(capi_pool_table, threads_that_first_use_a_device_together_share_one_pool) {
  vram::capi::pool_table table("sim:64MiB");
  constexpr int threads = 8;
  std::vector<vram::pool_resource*> seen(threads, nullptr);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back([&, t] { seen[t] = &table.pool(5); });
  for (auto& w : workers) w.join();
  ASSERT_NE(table.existing(5), nullptr);
  for (int t = 0; t < threads; ++t) EXPECT_EQ(seen[t], table.existing(5)) << "thread " << t;
  for (int i = 0; i < vram::capi::max_devices; ++i) {
    if (i != 5) EXPECT_EQ(table.existing(i), nullptr) << i;  // no other pool was made
  }
  EXPECT_NO_THROW(table.validate());
}

// VRAM_DEVICE=sim:costs=FILE: the simulated devices run under the file's model, read once when the table is
// made; a file that cannot be read is a bad VRAM_DEVICE, told by every call as a malformed value is.
TEST(capi_pool_table, a_cost_model_file_is_read_at_start) {
  const auto path = (std::filesystem::temp_directory_path() / ("vram_capi_costs_" + std::to_string(getpid()) + ".json")).string();
  std::ofstream(path) << R"({"curves": {"mem_create": [[1, 1000000]]}})";
  vram::capi::pool_table table(("sim:64MiB,costs=" + path).c_str());
  std::remove(path.c_str());  // read already: the devices made later do not need it
  EXPECT_EQ(table.device_count(), 8);
  EXPECT_THAT(table.device_name(1), HasSubstr("(costs from " + path + ") #1"));
  const auto p = table.pool(1).allocate(1000);
  EXPECT_NO_THROW(table.validate());
  table.pool(1).deallocate(p, 1000);

  vram::capi::pool_table missing("sim:costs=/nonexistent/costs.json");
  EXPECT_THROW(
      {
        try {
          missing.device_count();
        } catch (const vram::usage_error& e) {
          EXPECT_THAT(e.what(), StartsWith("VRAM_DEVICE='sim:costs=/nonexistent/costs.json': /nonexistent/costs.json: "
                                           "cannot open the cost model"));
          throw;
        }
      },
      vram::usage_error);
  EXPECT_THROW(missing.pool(0), vram::usage_error);
}

TEST(capi_pool_table, cuda_without_a_gpu_is_a_device_error) {
  vram::capi::pool_table table("cuda");
  if (vram::cuda_available()) {
    EXPECT_GT(table.device_count(), 0);
    EXPECT_FALSE(table.simulated());
  } else {
    EXPECT_THROW(table.device_count(), vram::device_error);
    vram::capi::pool_table automatic("");  // the default, auto, falls back to the simulated devices
    EXPECT_EQ(automatic.device_count(), 8);
    EXPECT_TRUE(automatic.simulated());
  }
}

}  // namespace
