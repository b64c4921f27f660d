// One conformance suite for every allocation policy in the registry (vram::policies()), each over a simulated
// device: allocate(0), alignment, no overlap between live blocks, accounting at every step of a seeded random
// run, what release_cached() gives back, out of memory, bad frees, and stream ordering.
//
// The suite is instantiated from the registry, so a policy added there is tested here with no change. Where a
// policy's documented semantics differ from the strictest reading of the contract (memory_resource.hpp), the
// table `expectations` below says so, with the reason; a policy missing from the table gets the strict
// defaults of `policy_expectation`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/decorators/limit_resource.hpp"
#include "vram/decorators/statistics_resource.hpp"
#include "vram/decorators/thread_safe_resource.hpp"
#include "vram/decorators/tracing_resource.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/emulation/rmm_pool_resource.hpp"
#include "vram/policies/registry.hpp"
#include "support/live_map.hpp"

namespace vram {
namespace {

/// When a block freed on a stream whose work is still in flight may serve an allocation on another stream.
enum class reuse_rule {
  never_in_flight,    // not before the freeing stream's work completes (the allocator tracks it)
  gpu_waits,          // at once, but only after making the new stream wait on the GPU (counted by the policy)
  free_synchronizes,  // the free itself waits for the device (cudaFree), so nothing is in flight afterwards
};

/// What the contract means for one policy. The defaults are the strict contract.
struct policy_expectation {
  /// allocated_bytes() counts every live block at least at its size rounded up to 512 bytes.
  bool allocated_covers_512_rounding = true;
  /// After every block is freed, release_cached() leaves nothing held: reserved 0 and the device's used
  /// bytes 0. Otherwise (a pool that never shrinks) release_cached() changes neither.
  bool release_cached_returns_everything = true;
  /// reserved_bytes() == the simulated device's used bytes (the policy reserves in whole device units).
  bool reserved_is_device_used = true;
  /// Stream ordering for blocks of at most 2 MiB and for larger ones.
  reuse_rule small_blocks = reuse_rule::never_in_flight;
  reuse_rule large_blocks = reuse_rule::never_in_flight;
};

/// Per policy, from its header and docs (docs/device.md, docs/emulations/*.md):
///  - vram: the strict contract. Its pool holds whole physical handles (reserved == device used), trim()
///    releases every handle no live block touches, and a block freed on a stream waits for that stream
///    (before a second stream is seen, a block that went back to the arena may serve the new stream, which
///    then waits for the first on the device: tests/pool_test.cpp; here the thread's cache keeps it).
///  - cuda-direct: reserved is the device pages its blocks occupy, so equal to the device's used bytes; nothing
///    is cached; cudaFree waits for the whole device, so no work is in flight after a free (docs/device.md).
///  - torch-native / torch-expandable: segments of whole 2 MiB units (legacy) or mapped pages; empty_cache
///    frees every wholly free segment or page; a cached block serves only its own stream, so another stream
///    never gets it (docs/emulations/torch.md).
///  - rmm-pool: the pool never shrinks (release_cached() does nothing); upstream blocks need not be whole
///    2 MiB pages, so the device may use more than reserved; another stream takes a freed block at once after
///    a GPU-side cudaStreamWaitEvent, counted in stream_waits() (docs/emulations/rmm.md).
///  - cub-bins: above the largest bin (2 MiB) a block is allocated at exactly its size (allocated counts the
///    exact size, not 512 rounding) and freed with cudaFree, which waits for the device; a binned block of
///    another stream is reused only once its ready event completed; the device packs small bins into shared
///    pages, so used != reserved; FreeAllCached returns the whole cache (docs/emulations/cub.md).
const std::map<std::string, policy_expectation, std::less<>>& expectations() {
  static const std::map<std::string, policy_expectation, std::less<>> table{
      {"vram", {}},
      {"cuda-direct",
       {.small_blocks = reuse_rule::free_synchronizes, .large_blocks = reuse_rule::free_synchronizes}},
      {"torch-native", {}},
      {"torch-expandable", {}},
      {"rmm-pool",
       {.release_cached_returns_everything = false,
        .reserved_is_device_used = false,
        .small_blocks = reuse_rule::gpu_waits,
        .large_blocks = reuse_rule::gpu_waits}},
      {"cub-bins",
       {.allocated_covers_512_rounding = false,
        .reserved_is_device_used = false,
        .large_blocks = reuse_rule::free_synchronizes}},
  };
  return table;
}

policy_expectation expectation_for(std::string_view policy) {
  const auto it = expectations().find(policy.substr(policy.rfind('+') + 1));  // a decorator's: its upstream's
  return it == expectations().end() ? policy_expectation{} : it->second;
}

/// The decorators run the suite too, each over one policy ("statistics+vram"): a decorator passes the
/// contract on, so the upstream's expectations hold. The limit is far above what any test allocates.
const std::vector<std::string>& decorated() {
  static const std::vector<std::string> names{"statistics+vram", "limit+torch-native", "thread_safe+rmm-pool",
                                              "tracing+cub-bins", "statistics+cuda-direct",
                                              "thread_safe+torch-expandable"};
  return names;
}

std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (const auto& p : policies()) names.emplace_back(p.name);
  return names;
}

std::vector<std::string> suite_names() {
  auto names = policy_names();
  names.insert(names.end(), decorated().begin(), decorated().end());
  return names;
}

/// Where the tracing decorator's files go; removed when the suite ends.
const std::filesystem::path& trace_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("vram_conformance_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

struct remove_trace_dir : ::testing::Environment {
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(trace_dir(), ec);
  }
};
const auto* const trace_dir_cleanup = ::testing::AddGlobalTestEnvironment(new remove_trace_dir);

/// A policy of the registry, or a decorator over one.
std::unique_ptr<memory_resource> make_policy(const std::string& name, device& dev) {
  const auto plus = name.find('+');
  if (plus == std::string::npos) return make_resource(name, dev);
  const std::string decorator = name.substr(0, plus);
  auto up = make_resource(name.substr(plus + 1), dev);
  if (decorator == "statistics") return std::make_unique<statistics_resource>(std::move(up));
  if (decorator == "limit") return std::make_unique<limit_resource>(std::move(up), std::size_t{1} << 50);
  if (decorator == "thread_safe") return std::make_unique<thread_safe_resource>(std::move(up));
  if (decorator == "tracing") {
    static std::atomic<int> n{0};
    const auto path = trace_dir() / ("t" + std::to_string(n++) + ".vram");
    return std::make_unique<tracing_resource>(std::move(up), std::make_unique<trace_recorder>(path.string()));
  }
  throw usage_error("conformance: no decorator " + decorator);
}

/// The rmm pool under any decorators, or null.
const rmm_pool_resource* as_rmm(const memory_resource* r) {
  while (const auto* a = dynamic_cast<const resource_adaptor*>(r)) r = &a->upstream();
  return dynamic_cast<const rmm_pool_resource*>(r);
}

sim_device_options device_of(std::size_t capacity) {
  sim_device_options o;
  o.capacity = capacity;
  o.costs = cost_model::zero();
  o.label = "conformance device";
  return o;
}

using test_support::live_map;

bool overlap(device_ptr a, std::size_t a_bytes, device_ptr b, std::size_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

class conformance : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<memory_resource> make(sim_device& dev) const { return make_policy(GetParam(), dev); }
  policy_expectation expected() const { return expectation_for(GetParam()); }
};

TEST(conformance_table, names_only_policies_of_the_registry) {
  // An entry for a name the registry does not know would silently test nothing.
  const auto names = policy_names();
  for (const auto& [name, e] : expectations()) EXPECT_THAT(names, ::testing::Contains(name)) << name;
}

TEST_P(conformance, zero_bytes_is_null_and_costs_nothing) {
  sim_device dev(device_of(1 * GiB));
  auto r = make(dev);
  const std::size_t reserved = r->reserved_bytes(), used = dev.used_bytes();
  EXPECT_EQ(r->allocate(0), 0u);
  EXPECT_EQ(r->allocate(0, 3), 0u);
  EXPECT_EQ(r->try_allocate(0), 0u);
  r->deallocate(0, 0);
  r->deallocate(0, 4096, 3);
  EXPECT_EQ(r->allocated_bytes(), 0u);
  EXPECT_EQ(r->reserved_bytes(), reserved);
  EXPECT_EQ(dev.used_bytes(), used);
  r->validate();
}

TEST_P(conformance, blocks_of_every_size_are_512_aligned_and_disjoint) {
  // 1 B to 256 MiB, all live at once: 512-aligned starts, no two overlapping.
  const std::vector<std::size_t> sizes{1,           2,           511,         512,          513,
                                       1000,        4095,        4 * KiB,     64 * KiB + 1, 256 * KiB,
                                       1 * MiB - 1, 1 * MiB,     1 * MiB + 1, 2 * MiB,      2 * MiB + 1,
                                       10 * MiB - 1, 20 * MiB + 3, 64 * MiB + 1, 256 * MiB};
  sim_device dev(device_of(4 * GiB));
  auto r = make(dev);
  live_map live;
  std::vector<device_ptr> ptrs;
  for (const std::size_t bytes : sizes) {
    const device_ptr p = r->allocate(bytes);
    ASSERT_NE(p, 0u) << bytes;
    EXPECT_EQ(p % 512, 0u) << bytes << " bytes at " << p;
    EXPECT_TRUE(live.add(p, bytes)) << bytes << " bytes at " << p << " overlap a live block";
    ptrs.push_back(p);
    r->validate();
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) r->deallocate(ptrs[i], sizes[i]);
  EXPECT_EQ(r->allocated_bytes(), 0u);
  r->validate();
}

TEST_P(conformance, a_full_device_running_behind_the_host_keeps_blocks_disjoint) {
  // A GPU runs behind the host: here one stream's work completes only every 7 steps (the stream is held and
  // released), as in a PyTorch program, on a 256 MiB device that the run keeps full (sizes log-uniform in
  // [512 B, 16 MiB], up to 248 MiB live; a failed allocation frees a random block instead). Whatever each
  // policy defers (frees, unmaps) until the stream's work completes, blocks never share an address and
  // validate() holds at every step. vram's pool once read a view unmapped in its books but not yet on the
  // device here (docs/torch-bench.md).
  sim_device dev(device_of(256 * MiB));
  auto r = make(dev);
  std::mt19937_64 rng(20261205);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<std::pair<device_ptr, std::size_t>> blocks;
  live_map live;
  std::size_t live_bytes = 0, failed = 0;
  auto free_at = [&](std::size_t i) {
    const auto [p, bytes] = blocks[i];
    blocks[i] = blocks.back();
    blocks.pop_back();
    live.remove(p);
    r->deallocate(p, bytes, 1);
    live_bytes -= bytes;
  };
  dev.hold(1);
  for (int step = 0; step < 2000; ++step) {
    if (step % 7 == 6) {
      dev.release(1);
      dev.hold(1);
    }
    const auto bytes = static_cast<std::size_t>(std::floor(std::exp2(9.0 + 15.0 * unit(rng))));
    if (blocks.empty() || (unit(rng) < 0.6 && live_bytes + bytes <= 248 * MiB)) {
      const device_ptr p = r->try_allocate(bytes, 1);
      if (p == 0) {
        ++failed;
        if (!blocks.empty()) free_at(rng() % blocks.size());
        continue;
      }
      ASSERT_TRUE(live.add(p, bytes)) << "step " << step << ": " << bytes << " bytes at " << p
                                      << " overlap a live block";
      blocks.emplace_back(p, bytes);
      live_bytes += bytes;
    } else {
      free_at(rng() % blocks.size());
    }
    ASSERT_NO_THROW(r->validate()) << "step " << step;
    ASSERT_GE(r->allocated_bytes(), live_bytes) << "step " << step;
  }
  dev.release(1);
  while (!blocks.empty()) free_at(blocks.size() - 1);
  EXPECT_EQ(r->allocated_bytes(), 0u);
  r->validate();
  // The device was full: some requests failed (which ones depends on the policy), so the run did reach it.
  EXPECT_GT(failed, 0u);
}

TEST_P(conformance, seeded_random_run_keeps_blocks_disjoint_and_accounts_at_every_step) {
  // 3000 steps on an 8 GiB device with at most 1 GiB live: 70% of sizes log-uniform in [1 B, 1 MiB], 30% in
  // (1 MiB, 64 MiB]; streams 0-2; frees in random order. No policy should need 8x the live bytes, so every
  // allocation must succeed.
  const policy_expectation e = expected();
  sim_device dev(device_of(8 * GiB));
  auto r = make(dev);
  std::mt19937_64 rng(20240611);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  struct block {
    device_ptr p;
    std::size_t bytes;
    stream_id stream;
  };
  std::vector<block> blocks;
  live_map live;
  std::size_t live_bytes = 0, live_rounded = 0;
  constexpr std::size_t max_live = 1 * GiB;

  auto check_accounting = [&](int step) {
    r->validate();
    ASSERT_GE(r->reserved_bytes(), r->allocated_bytes()) << "step " << step;
    ASSERT_GE(r->allocated_bytes(), live_bytes) << "step " << step;
    if (e.allocated_covers_512_rounding) ASSERT_GE(r->allocated_bytes(), live_rounded) << "step " << step;
    // Reserved bytes are held from the device, which is this resource's alone.
    ASSERT_GE(dev.used_bytes(), r->reserved_bytes()) << "step " << step;
    if (e.reserved_is_device_used) ASSERT_EQ(dev.used_bytes(), r->reserved_bytes()) << "step " << step;
  };

  for (int step = 0; step < 3000; ++step) {
    const bool small = unit(rng) < 0.7;
    const double lo = small ? 0.0 : 20.0, hi = small ? 20.0 : 26.0;  // log2 of the size range
    const auto bytes = static_cast<std::size_t>(std::max(1.0, std::floor(std::exp2(lo + (hi - lo) * unit(rng)))));
    const bool alloc = blocks.empty() || (unit(rng) < 0.55 && live_bytes + bytes <= max_live);
    if (alloc) {
      const stream_id s = rng() % 3;
      const device_ptr p = r->try_allocate(bytes, s);
      ASSERT_NE(p, 0u) << "step " << step << ": " << bytes << " bytes failed with " << live_bytes << " live";
      ASSERT_EQ(p % 512, 0u) << "step " << step;
      ASSERT_TRUE(live.add(p, bytes)) << "step " << step << ": " << bytes << " bytes at " << p
                                      << " overlap a live block";
      blocks.push_back({p, bytes, s});
      live_bytes += bytes;
      live_rounded += round_up(bytes, 512);
    } else {
      const std::size_t i = rng() % blocks.size();
      const block b = blocks[i];
      blocks[i] = blocks.back();
      blocks.pop_back();
      live.remove(b.p);
      r->deallocate(b.p, b.bytes, b.stream);
      live_bytes -= b.bytes;
      live_rounded -= round_up(b.bytes, 512);
    }
    check_accounting(step);
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (const block& b : blocks) r->deallocate(b.p, b.bytes, b.stream);
  live_bytes = live_rounded = 0;
  check_accounting(3000);
  EXPECT_EQ(r->allocated_bytes(), 0u);

  const std::size_t reserved_before = r->reserved_bytes(), used_before = dev.used_bytes();
  r->release_cached();
  r->validate();
  if (e.release_cached_returns_everything) {
    EXPECT_EQ(r->reserved_bytes(), 0u);
    EXPECT_EQ(dev.used_bytes(), 0u);
  } else {
    EXPECT_EQ(r->reserved_bytes(), reserved_before);
    EXPECT_EQ(dev.used_bytes(), used_before);
  }
  dev.validate();
}

TEST_P(conformance, out_of_memory_returns_null_or_throws_naming_the_size) {
  sim_device dev(device_of(64 * MiB));
  auto r = make(dev);
  constexpr std::size_t huge = 1 * GiB + 512;  // 16x the device
  EXPECT_EQ(r->try_allocate(huge), 0u);
  EXPECT_EQ(r->allocated_bytes(), 0u);
  r->validate();
  try {
    r->allocate(huge, 5);
    ADD_FAILURE() << "allocate of " << huge << " bytes on a 64 MiB device did not throw";
  } catch (const out_of_memory& ex) {
    const std::string what = ex.what();
    EXPECT_TRUE(what.find(std::to_string(huge)) != std::string::npos ||
                what.find(format_bytes(huge)) != std::string::npos)
        << what;
  }
  EXPECT_EQ(r->allocated_bytes(), 0u);
  r->validate();

  // Fill the device with 4 MiB blocks: at most 64 / 4 = 16 fit; the one after fails without harm.
  live_map live;
  std::vector<device_ptr> ptrs;
  for (int i = 0; i <= 16; ++i) {
    const device_ptr p = r->try_allocate(4 * MiB);
    if (p == 0) break;
    ASSERT_TRUE(live.add(p, 4 * MiB));
    ptrs.push_back(p);
  }
  EXPECT_GE(ptrs.size(), 1u);
  EXPECT_LE(ptrs.size(), 16u);
  EXPECT_EQ(r->try_allocate(4 * MiB), 0u) << "the device should be full";
  EXPECT_THROW(r->allocate(4 * MiB), out_of_memory);
  EXPECT_GE(r->allocated_bytes(), ptrs.size() * 4 * MiB);
  EXPECT_LE(dev.used_bytes(), dev.capacity());
  r->validate();
  for (const device_ptr p : ptrs) r->deallocate(p, 4 * MiB);
  EXPECT_EQ(r->allocated_bytes(), 0u);
  // Memory freed after a failure serves again.
  const device_ptr again = r->allocate(4 * MiB);
  EXPECT_NE(again, 0u);
  r->deallocate(again, 4 * MiB);
  r->validate();
}

TEST_P(conformance, requests_too_large_to_round_are_refused_and_change_nothing) {
  // 2^64 - 1 rounded up to 512 (or to any granule) would wrap to 0: the request must be refused before any
  // rounding, and the next small block must not land on a live one.
  sim_device dev(device_of(1 * GiB));
  auto r = make(dev);
  const device_ptr first = r->allocate(1024);
  for (const std::size_t bytes : {~std::size_t{0}, ~std::size_t{0} - 511, memory_resource::max_request_bytes + 1}) {
    EXPECT_EQ(r->try_allocate(bytes), 0u) << bytes;
    try {
      r->allocate(bytes);
      ADD_FAILURE() << "allocate(" << bytes << ") did not throw";
    } catch (const out_of_memory& ex) {
      EXPECT_THAT(ex.what(), ::testing::HasSubstr(std::to_string(bytes) + " bytes on stream 0: no device is that large"));
      // Past 2^63 a size is most likely a negative one cast to unsigned, and the message asks; below, not.
      EXPECT_EQ(std::string(ex.what()).ends_with("is the size a negative number cast to unsigned?"),
                bytes > std::numeric_limits<std::size_t>::max() / 2)
          << ex.what();
    }
    EXPECT_THROW(r->deallocate(first, bytes), usage_error) << bytes;
  }
  const device_ptr second = r->allocate(1024);
  EXPECT_FALSE(overlap(first, 1024, second, 1024));
  r->validate();
  r->deallocate(first, 1024);
  r->deallocate(second, 1024);
  r->validate();
}

TEST_P(conformance, bad_frees_throw_usage_error_and_change_nothing) {
  sim_device dev(device_of(1 * GiB));
  auto r = make(dev);
  const device_ptr a = r->allocate(1000);
  const device_ptr b = r->allocate(3 * MiB);
  const std::size_t reserved = r->reserved_bytes(), allocated = r->allocated_bytes(), used = dev.used_bytes();
  auto unchanged = [&](const char* what) {
    EXPECT_EQ(r->reserved_bytes(), reserved) << what;
    EXPECT_EQ(r->allocated_bytes(), allocated) << what;
    EXPECT_EQ(dev.used_bytes(), used) << what;
    r->validate();
  };
  EXPECT_THROW(r->deallocate(0x1234'5600, 1000), usage_error);  // below both of the device's address regions
  unchanged("unknown pointer");
  EXPECT_THROW(r->deallocate(b + 512, 3 * MiB - 512), usage_error);
  unchanged("pointer inside a live block");
  EXPECT_THROW(r->deallocate(a, 3 * MiB), usage_error);
  unchanged("wrong size (larger)");
  EXPECT_THROW(r->deallocate(b, 1000), usage_error);
  unchanged("wrong size (smaller)");

  r->deallocate(a, 1000);
  const std::size_t reserved2 = r->reserved_bytes(), allocated2 = r->allocated_bytes();
  EXPECT_THROW(r->deallocate(a, 1000), usage_error);
  EXPECT_EQ(r->reserved_bytes(), reserved2);
  EXPECT_EQ(r->allocated_bytes(), allocated2);
  r->validate();
  r->deallocate(b, 3 * MiB);  // the good block is still freed normally
  EXPECT_EQ(r->allocated_bytes(), 0u);
  r->validate();
}

/// Allocates on stream 1, holds it (work in flight), frees on stream 1, allocates the same size on stream 2.
void check_stream_ordering(const std::string& policy, reuse_rule rule, std::size_t bytes) {
  SCOPED_TRACE(policy + ", " + std::to_string(bytes) + " bytes");
  sim_device dev(device_of(4 * GiB));
  auto r = make_policy(policy, dev);
  const auto* rmm = as_rmm(r.get());
  const device_ptr p1 = r->allocate(bytes, 1);
  dev.hold(1);
  const event_id work = dev.event_create();
  dev.event_record(work, 1);  // stream 1 still uses p1 when the program frees it
  ASSERT_FALSE(dev.event_query(work));
  const std::uint64_t waits_before = rmm ? rmm->stream_waits() : 0;
  r->deallocate(p1, bytes, 1);
  const bool free_waited = dev.event_query(work);
  const device_ptr p2 = r->allocate(bytes, 2);
  const bool reused = overlap(p1, bytes, p2, bytes);
  switch (rule) {
    case reuse_rule::never_in_flight:
      EXPECT_FALSE(reused) << "stream 2 got memory stream 1 may still use (" << p1 << " and " << p2 << ")";
      break;
    case reuse_rule::gpu_waits:
      if (reused) EXPECT_GT(rmm ? rmm->stream_waits() : 0, waits_before) << "reused with no GPU-side wait";
      break;
    case reuse_rule::free_synchronizes:
      EXPECT_TRUE(free_waited) << "the free should have waited for the device";
      break;
  }
  r->validate();
  dev.release(1);
  dev.event_destroy(work);
  r->deallocate(p2, bytes, 2);
  EXPECT_EQ(r->allocated_bytes(), 0u);
  r->validate();
}

TEST_P(conformance, a_block_freed_on_a_busy_stream_is_not_handed_to_another_stream_early) {
  const policy_expectation e = expected();
  check_stream_ordering(GetParam(), e.small_blocks, 1 * MiB);
  check_stream_ordering(GetParam(), e.large_blocks, 24 * MiB);
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  if (const auto plus = s.find('+'); plus != std::string::npos) s = s.substr(plus + 1) + "_under_" + s.substr(0, plus);
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

INSTANTIATE_TEST_SUITE_P(every_policy, conformance, ::testing::ValuesIn(suite_names()), test_name);

}  // namespace
}  // namespace vram
