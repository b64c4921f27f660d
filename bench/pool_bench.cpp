// Google Benchmark over the loops of `vram bench` on the simulated device: one thread, or two, each
// allocating and freeing one block of one size, through vram's pool (pool_resource over a sim_device) and
// through glibc's malloc/free. Each benchmark iteration is one alloc+free pair (items/s = pairs/s).
// The allocator of a benchmark is made once, on first use, and shared by its threads, as in `vram bench`;
// each thread warms its own worker up before timing starts.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>

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
