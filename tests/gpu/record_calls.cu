// A CUDA program with a known sequence of device-memory calls, for `vram record` (tests/gpu/record_check.py):
// the runtime (cudaMalloc / cudaFree), stream-ordered allocation (cudaMallocAsync / cudaFreeAsync), the driver
// (cuMemAlloc / cuMemFree) and virtual memory (cuMemCreate, cuMemMap, cuMemUnmap). It prints, as JSON lines,
// each call it made with its address and size, in order, to standard output or the file named: what the
// recording must hold.
//   nvcc -o record_calls record_calls.cu -lcuda && ./record_calls [expected.jsonl]
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_RT(x)                                                              \
  do {                                                                           \
    cudaError_t e = (x);                                                         \
    if (e != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));               \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)
#define CHECK_DRV(x)                                                             \
  do {                                                                           \
    CUresult r = (x);                                                            \
    if (r != CUDA_SUCCESS) {                                                     \
      std::fprintf(stderr, "%s: error %d\n", #x, static_cast<int>(r));           \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

static FILE* out = stdout;

static void said(const char* action, unsigned long long addr, unsigned long long size) {
  std::fprintf(out, "{\"action\": \"%s\", \"addr\": %llu, \"size\": %llu}\n", action, addr, size);
}

int main(int argc, char** argv) {
  if (argc > 1 && (out = std::fopen(argv[1], "w")) == nullptr) return 2;
  const size_t MiB = 1 << 20;
  CHECK_RT(cudaSetDevice(0));
  CHECK_RT(cudaFree(nullptr));  // the context, before anything is recorded as ours

  void *a = nullptr, *b = nullptr, *c = nullptr;
  CHECK_RT(cudaMalloc(&a, 1 * MiB));
  said("alloc", reinterpret_cast<unsigned long long>(a), 1 * MiB);
  CHECK_RT(cudaMalloc(&b, 3 * MiB));
  said("alloc", reinterpret_cast<unsigned long long>(b), 3 * MiB);
  CHECK_RT(cudaFree(a));
  said("free_requested", reinterpret_cast<unsigned long long>(a), 1 * MiB);

  cudaStream_t s;
  CHECK_RT(cudaStreamCreate(&s));
  CHECK_RT(cudaMallocAsync(&c, 2 * MiB, s));
  said("alloc", reinterpret_cast<unsigned long long>(c), 2 * MiB);
  CHECK_RT(cudaFreeAsync(c, s));
  said("free_requested", reinterpret_cast<unsigned long long>(c), 2 * MiB);
  CHECK_RT(cudaStreamSynchronize(s));

  CUdeviceptr d = 0;
  CHECK_DRV(cuMemAlloc(&d, 5 * MiB));
  said("alloc", d, 5 * MiB);
  CHECK_DRV(cuMemFree(d));
  said("free_requested", d, 5 * MiB);

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t granularity = 0;
  CHECK_DRV(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemGenericAllocationHandle h;
  CHECK_DRV(cuMemCreate(&h, granularity, &prop, 0));
  CUdeviceptr va = 0;
  CHECK_DRV(cuMemAddressReserve(&va, 2 * granularity, 0, 0, 0));
  CHECK_DRV(cuMemMap(va, granularity, 0, h, 0));
  said("segment_map", va, granularity);
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK_DRV(cuMemSetAccess(va, granularity, &access, 1));
  CHECK_DRV(cuMemUnmap(va, granularity));
  said("segment_unmap", va, granularity);
  CHECK_DRV(cuMemRelease(h));
  CHECK_DRV(cuMemAddressFree(va, 2 * granularity));

  CHECK_RT(cudaFree(b));
  said("free_requested", reinterpret_cast<unsigned long long>(b), 3 * MiB);
  CHECK_RT(cudaStreamDestroy(s));
  std::fclose(out);
  return 0;
}
