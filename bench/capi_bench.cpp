// Google Benchmark of the C API's hot path (vram_malloc + vram_free of one block, over and over), side by
// side through the two ways a program reaches it:
//  - linked: the C API of the static library linked into this program, where the linker turns thread-local
//    reads into plain offsets from the thread pointer (the cheapest there is);
//  - dlopen: libvram.so loaded with dlopen, as PyTorch and ctypes load it, where thread-local reads go through
//    TLS descriptors (CMakeLists.txt says why the library keeps no initial-exec variable).
// The ratio of the two is what loading by dlopen costs the hot path. Simulated devices (VRAM_DEVICE=sim), so
// the figures are host-side cost alone; each iteration is one alloc+free pair (items/s = pairs/s).
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "vram/vram.h"

namespace {

using malloc_fn = void* (*)(ssize_t, int, void*);
using free_fn = void (*)(void*, ssize_t, int, void*);

const bool environment_set = [] {
  setenv("VRAM_DEVICE", "sim", 1);
  return true;
}();

struct api {
  malloc_fn malloc;
  free_fn free;
};

const api& linked() {
  static const api a{&vram_malloc, &vram_free};
  return a;
}

const api& loaded() {
  static const api a = [] {
    void* lib = dlopen(VRAM_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "capi_bench: dlopen(%s): %s\n", VRAM_LIBRARY_PATH, dlerror());
      std::abort();
    }
    return api{reinterpret_cast<malloc_fn>(dlsym(lib, "vram_malloc")), reinterpret_cast<free_fn>(dlsym(lib, "vram_free"))};
  }();
  return a;
}

void run_pairs(benchmark::State& state, const api& a) {
  const auto bytes = static_cast<ssize_t>(state.range(0));
  for (int i = 0; i < 16; ++i) a.free(a.malloc(bytes, 0, nullptr), bytes, 0, nullptr);  // cached from here on
  std::uintptr_t folded = 0;
  for (auto _ : state) {
    void* p = a.malloc(bytes, 0, nullptr);
    folded ^= reinterpret_cast<std::uintptr_t>(p);
    a.free(p, bytes, 0, nullptr);
  }
  benchmark::DoNotOptimize(folded);
  if (folded == 0 && state.iterations() % 2 == 1) state.SkipWithError("vram_malloc returned NULL");
  state.SetItemsProcessed(state.iterations());
}

void BM_capi_linked(benchmark::State& state) { run_pairs(state, linked()); }
void BM_capi_dlopen(benchmark::State& state) { run_pairs(state, loaded()); }

void sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t s : {std::int64_t{4} << 10, std::int64_t{1} << 20, std::int64_t{64} << 20}) b->Arg(s);
  b->Threads(1)->Threads(2)->UseRealTime();
}

}  // namespace

BENCHMARK(BM_capi_linked)->Apply(sizes);
BENCHMARK(BM_capi_dlopen)->Apply(sizes);
