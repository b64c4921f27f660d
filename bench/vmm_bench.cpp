// The virtual memory calls on a real GPU, through the device seam, by handle size: what the simulated
// device's cost model is fitted to (docs/device.md, "Calibration"). Each benchmark times one kind of call
// by hand (UseManualTime) and reports it per handle; what a call needs first (handles, mappings) is made
// outside the timed part. Skipped where no GPU is in use.
//
//   SetAccess/SIZE/COUNT/BATCHED: cuMemSetAccess over COUNT handles mapped side by side, once over the range
//       (BATCHED=1) or once per handle (0): whether one call over several handles costs less than several;
//   Unmap/SIZE/COUNT/BATCHED: cuMemUnmap likewise;
//   Map/SIZE, Create/SIZE, Release/SIZE: one handle;
//   Grow/TOTAL/SIZE: TOTAL MiB made accessible in handles of SIZE MiB, as the pool grows (cuMemCreate,
//       cuMemMap, cuMemSetAccess a handle, into a range reserved beforehand), reported per GiB: what a
//       handle's size saves on a large block;
//   Malloc/TOTAL: one cudaMalloc of TOTAL MiB, reported per GiB, beside it.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <vector>

#include "vram/core/size.hpp"
#include "vram/device/device_spec.hpp"

namespace {

using vram::MiB;

vram::device* gpu() {
  static std::unique_ptr<vram::device> dev = [] {
    try {
      auto choice = vram::open_device(vram::parse_device_spec("cuda"));
      return std::move(choice.dev);
    } catch (const std::exception&) {
      return std::unique_ptr<vram::device>{};
    }
  }();
  return dev.get();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// COUNT handles of SIZE bytes mapped side by side in one reservation.
struct mapped_run {
  vram::device& dev;
  std::size_t size, count;
  vram::device_ptr va = 0;
  std::vector<vram::phys_handle> handles;

  mapped_run(vram::device& d, std::size_t s, std::size_t n, bool map) : dev(d), size(s), count(n) {
    va = dev.address_reserve(size * count, size);
    for (std::size_t i = 0; i < count; ++i) handles.push_back(dev.mem_create(size));
    if (map)
      for (std::size_t i = 0; i < count; ++i) dev.mem_map(va + i * size, size, handles[i]);
  }
  void unmap() {
    for (std::size_t i = 0; i < count; ++i) dev.mem_unmap(va + i * size, size);
  }
  ~mapped_run() {
    for (auto h : handles) dev.mem_release(h);
    dev.address_free(va, size * count);
  }
};

/// Reports the timed part per handle, in µs: COUNT handles an iteration.
void per_handle(benchmark::State& state, std::size_t count) {
  state.counters["us_per_handle"] = benchmark::Counter(
      static_cast<double>(count) * 1e-6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

/// Reports the timed part per GiB made, in µs: @p total bytes an iteration.
void per_gib(benchmark::State& state, std::size_t total) {
  state.counters["us_per_GiB"] = benchmark::Counter(static_cast<double>(total) / (1024.0 * MiB) * 1e-6,
                                                    benchmark::Counter::kIsIterationInvariantRate |
                                                        benchmark::Counter::kInvert);
}

void SetAccess(benchmark::State& state) {
  vram::device* dev = gpu();
  if (dev == nullptr) return state.SkipWithError("no GPU in use");
  const std::size_t size = static_cast<std::size_t>(state.range(0)) * MiB, count = static_cast<std::size_t>(state.range(1));
  const bool batched = state.range(2) != 0;
  for (auto _ : state) {
    mapped_run run(*dev, size, count, true);
    const auto t0 = std::chrono::steady_clock::now();
    if (batched) {
      dev->set_access(run.va, size * count);
    } else {
      for (std::size_t i = 0; i < count; ++i) dev->set_access(run.va + i * size, size);
    }
    state.SetIterationTime(seconds_since(t0));
    run.unmap();
  }
  per_handle(state, count);
}

void Unmap(benchmark::State& state) {
  vram::device* dev = gpu();
  if (dev == nullptr) return state.SkipWithError("no GPU in use");
  const std::size_t size = static_cast<std::size_t>(state.range(0)) * MiB, count = static_cast<std::size_t>(state.range(1));
  const bool batched = state.range(2) != 0;
  for (auto _ : state) {
    mapped_run run(*dev, size, count, true);
    dev->set_access(run.va, size * count);
    const auto t0 = std::chrono::steady_clock::now();
    if (batched) {
      dev->mem_unmap(run.va, size * count);
    } else {
      run.unmap();
    }
    state.SetIterationTime(seconds_since(t0));
  }
  per_handle(state, count);
}

void Map(benchmark::State& state) {
  vram::device* dev = gpu();
  if (dev == nullptr) return state.SkipWithError("no GPU in use");
  const std::size_t size = static_cast<std::size_t>(state.range(0)) * MiB;
  for (auto _ : state) {
    mapped_run run(*dev, size, 1, false);
    const auto t0 = std::chrono::steady_clock::now();
    dev->mem_map(run.va, size, run.handles[0]);
    state.SetIterationTime(seconds_since(t0));
    run.unmap();
  }
}

void Create(benchmark::State& state) {
  vram::device* dev = gpu();
  if (dev == nullptr) return state.SkipWithError("no GPU in use");
  const std::size_t size = static_cast<std::size_t>(state.range(0)) * MiB;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const vram::phys_handle h = dev->mem_create(size);
    state.SetIterationTime(seconds_since(t0));
    dev->mem_release(h);
  }
}

void Release(benchmark::State& state) {
  vram::device* dev = gpu();
  if (dev == nullptr) return state.SkipWithError("no GPU in use");
  const std::size_t size = static_cast<std::size_t>(state.range(0)) * MiB;
  for (auto _ : state) {
    const vram::phys_handle h = dev->mem_create(size);
    const auto t0 = std::chrono::steady_clock::now();
    dev->mem_release(h);
    state.SetIterationTime(seconds_since(t0));
  }
}

void Grow(benchmark::State& state) {
  vram::device* dev = gpu();
  if (dev == nullptr) return state.SkipWithError("no GPU in use");
  const std::size_t total = static_cast<std::size_t>(state.range(0)) * MiB;
  const std::size_t size = static_cast<std::size_t>(state.range(1)) * MiB;
  const std::size_t count = total / size;
  for (auto _ : state) {
    const vram::device_ptr va = dev->address_reserve(total, size);
    std::vector<vram::phys_handle> handles;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < count; ++i) {
      handles.push_back(dev->mem_create(size));
      dev->mem_map(va + i * size, size, handles.back());
      dev->set_access(va + i * size, size);
    }
    state.SetIterationTime(seconds_since(t0));
    for (std::size_t i = 0; i < count; ++i) {
      dev->mem_unmap(va + i * size, size);
      dev->mem_release(handles[i]);
    }
    dev->address_free(va, total);
  }
  per_gib(state, total);
  state.counters["handles"] = static_cast<double>(count);
}

void Malloc(benchmark::State& state) {
  vram::device* dev = gpu();
  if (dev == nullptr) return state.SkipWithError("no GPU in use");
  const std::size_t total = static_cast<std::size_t>(state.range(0)) * MiB;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const vram::device_ptr p = dev->legacy_malloc(total);
    state.SetIterationTime(seconds_since(t0));
    dev->legacy_free(p);
  }
  per_gib(state, total);
}

constexpr long sizes[] = {2, 8, 32, 64, 128, 512};

void by_size(benchmark::internal::Benchmark* b) {
  for (const long s : sizes) b->Arg(s);
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}

void by_size_count(benchmark::internal::Benchmark* b) {
  for (const long s : {2L, 8L, 64L})
    for (const long n : {1L, 4L, 16L})
      for (const long batched : {0L, 1L})
        if (n > 1 || batched == 0) b->Args({s, n, batched});
  for (const long s : {32L, 128L, 512L}) b->Args({s, 1, 0});
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(SetAccess)->Apply(by_size_count);
BENCHMARK(Unmap)->Apply(by_size_count);
BENCHMARK(Map)->Apply(by_size);
BENCHMARK(Create)->Apply(by_size);
BENCHMARK(Release)->Apply(by_size);
BENCHMARK(Grow)
    ->ArgsProduct({{4096}, {2, 8, 64, 128, 256, 512, 1024, 4096}})
    ->ArgsProduct({{32768}, {64, 512, 1024, 4096, 32768}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(Malloc)->Arg(4096)->Arg(32768)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
