// Google Benchmark over the loops of `vram bench` on the simulated device: one thread, or two, each
// allocating and freeing one block of one size, through vram's pool (pool_resource over a sim_device) and
// through glibc's malloc/free. Each benchmark iteration is one alloc+free pair (items/s = pairs/s).
// BM_vram_varied_large is the pool's slow path instead: each thread holds up to 16 blocks of eight sizes
// from 512 KiB to 8 MiB and allocates or frees one at random (seeded per thread), so most requests miss the
// thread's cache and large blocks move between caches and the arena; one iteration is one call.
// BM_vram_pair_many_threads is BM_vram_pair on 16 threads of one fresh pool, with the pool's hot-path stops
// while it ran (counter `stops`): each thread's block, cycled in its own cache, should make none.
// The allocator of a benchmark is made once, on first use, and shared by its threads, as in `vram bench`;
// each thread warms its own worker up before timing starts.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "vram/measure/bench_suite.hpp"
#include "vram/measure/host_targets.hpp"
#include "vram/core/types.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/pool/pool_resource.hpp"

namespace {

using vram::measure::bench_target;

bench_target& vram_target() {
  static vram::sim_device dev;
  static std::unique_ptr<bench_target> target = vram::measure::make_resource_target(
      "vram", std::make_unique<vram::pool_resource>(dev), vram::measure::sharing::concurrent);
  return *target;
}

bench_target& glibc_target() {
  static std::unique_ptr<bench_target> target = vram::measure::make_glibc_target();
  return *target;
}

void run_pairs(benchmark::State& state, bench_target& target) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto worker = target.make_worker();
  std::uint64_t folded = worker->pairs(bytes, 16);  // warm-up: the size is cached where the allocator caches
  for (auto _ : state) folded ^= worker->pairs(bytes, 1);
  benchmark::DoNotOptimize(folded);
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(vram::measure::size_label(bytes));
}

void BM_vram_pair(benchmark::State& state) { run_pairs(state, vram_target()); }
void BM_glibc_pair(benchmark::State& state) { run_pairs(state, glibc_target()); }

vram::pool_resource& shared_pool() {
  static vram::sim_device dev;
  static vram::pool_resource pool(dev);
  return pool;
}

void BM_vram_varied_large(benchmark::State& state) {
  vram::pool_resource& pool = shared_pool();
  constexpr std::size_t KiB = 1024, MiB = 1024 * KiB;
  const std::size_t sizes[] = {512 * KiB, 1 * MiB, 3 * MiB, 6 * MiB, 2 * MiB, 768 * KiB, 5 * MiB, 8 * MiB};
  std::mt19937 rng(static_cast<unsigned>(state.thread_index()) + 1);
  std::vector<std::pair<vram::device_ptr, std::size_t>> held;
  for (auto _ : state) {
    if (held.size() < 16 && (held.empty() || (rng() & 1) != 0)) {
      const std::size_t s = sizes[rng() % 8];
      held.emplace_back(pool.allocate(s), s);
    } else {
      const std::size_t k = rng() % held.size();
      pool.deallocate(held[k].first, held[k].second);
      held[k] = held.back();
      held.pop_back();
    }
  }
  for (const auto& [p, s] : held) pool.deallocate(p, s);
  state.SetItemsProcessed(state.iterations());
}

void BM_vram_pair_many_threads(benchmark::State& state) {
  static vram::sim_device dev;
  static std::unique_ptr<vram::pool_resource> pool;
  static std::uint64_t stops_before = 0;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  if (state.thread_index() == 0) {
    pool = std::make_unique<vram::pool_resource>(dev);  // the threads wait for thread 0 before the loop
    stops_before = pool->stats().hot_path_stops;
  }
  for (auto _ : state) {
    const vram::device_ptr p = pool->allocate(bytes);
    pool->deallocate(p, bytes);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(vram::measure::size_label(bytes));
  if (state.thread_index() == 0) {
    state.counters["stops"] = static_cast<double>(pool->stats().hot_path_stops - stops_before);
  }
}

void sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t s : {std::int64_t{512}, std::int64_t{4} << 10, std::int64_t{64} << 10, std::int64_t{1} << 20,
                         std::int64_t{8} << 20, std::int64_t{64} << 20}) {
    b->Arg(s);
  }
  b->Threads(1)->Threads(2)->UseRealTime();
}

}  // namespace

BENCHMARK(BM_vram_pair)->Apply(sizes);
BENCHMARK(BM_glibc_pair)->Apply(sizes);
BENCHMARK(BM_vram_varied_large)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_vram_pair_many_threads)->Arg(64 << 10)->Arg(1 << 20)->Threads(16)->UseRealTime();
