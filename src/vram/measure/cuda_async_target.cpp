// cudaMallocAsync as a bench target (cuda_async_target.hpp).
// Decisions:
//  - The driver entry points come from the run-time table (cuda_driver.hpp); the context is the device's
//    primary one, retained here for the target's life and made current on each worker's thread.
//  - Streams are made CU_STREAM_NON_BLOCKING, so they never wait on the legacy default stream.
//  - The release threshold is read first and put back afterwards, and the pool trimmed to nothing, so the
//    run leaves the default pool as it found it (and the next cell starts from an empty pool).
//  - A worker synchronizes its stream before destroying it: the frees it queued have completed before the
//    pool is trimmed.
//  - Empty where cuda.h was not found at build time: make_cuda_async_target then says so.
#include "vram/measure/cuda_async_target.hpp"

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/cuda_device.hpp"
#include "vram/device/cuda_driver.hpp"

namespace vram::measure {

#if VRAM_HAVE_CUDA_H

namespace {

void check(const vram::detail::cuda_api& api, CUresult r, std::string_view call) {
  if (r != CUDA_SUCCESS) {
    throw device_error(fmt::format("{} failed: {}", call, vram::detail::cuda_error_text(api, r)));
  }
}

class cuda_async_worker final : public bench_worker {
 public:
  cuda_async_worker(const vram::detail::cuda_api& api, CUcontext ctx) : api_(api) {
    CUcontext current = nullptr;
    if (api_.ctx_get_current(&current) != CUDA_SUCCESS || current != ctx) {
      check(api_, api_.ctx_set_current(ctx), "cuCtxSetCurrent");
    }
    check(api_, api_.stream_create(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate(non-blocking)");
  }
  ~cuda_async_worker() override {
    api_.stream_synchronize(stream_);
    api_.stream_destroy(stream_);
  }
  cuda_async_worker(const cuda_async_worker&) = delete;
  cuda_async_worker& operator=(const cuda_async_worker&) = delete;

  std::uint64_t pairs(std::size_t bytes, std::uint64_t n) override {
    std::uint64_t folded = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      CUdeviceptr p = 0;
      const CUresult r = api_.mem_alloc_async(&p, bytes, stream_);
      if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        throw out_of_memory(fmt::format("cuMemAllocAsync({}) failed: out of memory", format_bytes(bytes)));
      }
      if (r != CUDA_SUCCESS) check(api_, r, fmt::format("cuMemAllocAsync({} bytes)", bytes));
      vram::measure::detail::keep(p);
      folded ^= p;
      if (const CUresult f = api_.mem_free_async(p, stream_); f != CUDA_SUCCESS) {
        check(api_, f, fmt::format("cuMemFreeAsync(0x{:x})", p));
      }
    }
    return folded;
  }

 private:
  const vram::detail::cuda_api& api_;
  CUstream stream_ = nullptr;
};

class cuda_async_target final : public bench_target {
 public:
  explicit cuda_async_target(cuda_device& dev) {
    std::string why;
    api_ = vram::detail::load_cuda_api(&why);
    if (api_ == nullptr) throw usage_error("cudaMallocAsync: CUDA is not available: " + why);
    const auto& api = *api_;
    check(api, api.device_get(&device_, dev.index()), fmt::format("cuDeviceGet({})", dev.index()));
    check(api, api.primary_ctx_retain(&ctx_, device_), "cuDevicePrimaryCtxRetain");
    try {
      check(api, api.ctx_set_current(ctx_), "cuCtxSetCurrent");
      check(api, api.device_get_default_mem_pool(&pool_, device_), "cuDeviceGetDefaultMemPool");
      check(api, api.mem_pool_get_attribute(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &saved_threshold_),
            "cuMemPoolGetAttribute(RELEASE_THRESHOLD)");
      cuuint64_t most = ~cuuint64_t{0};
      check(api, api.mem_pool_set_attribute(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &most),
            "cuMemPoolSetAttribute(RELEASE_THRESHOLD, max)");
    } catch (...) {
      api.primary_ctx_release(device_);
      throw;
    }
  }
  ~cuda_async_target() override {
    const auto& api = *api_;
    api.ctx_set_current(ctx_);
    api.mem_pool_trim_to(pool_, 0);
    api.mem_pool_set_attribute(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &saved_threshold_);
    api.primary_ctx_release(device_);
  }
  cuda_async_target(const cuda_async_target&) = delete;
  cuda_async_target& operator=(const cuda_async_target&) = delete;

  std::string_view name() const noexcept override { return "cudaMallocAsync"; }
  std::string note() const override {
    return "cudaMallocAsync: cuMemAllocAsync/cuMemFreeAsync on the device's default pool, release threshold at "
           "its maximum, one non-blocking stream per thread";
  }
  std::unique_ptr<bench_worker> make_worker() override { return std::make_unique<cuda_async_worker>(*api_, ctx_); }

 private:
  const vram::detail::cuda_api* api_ = nullptr;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  CUmemoryPool pool_ = nullptr;
  cuuint64_t saved_threshold_ = 0;
};

}  // namespace

std::unique_ptr<bench_target> make_cuda_async_target(device& dev) {
  auto* gpu = dynamic_cast<cuda_device*>(&dev);
  if (gpu == nullptr) throw usage_error("cudaMallocAsync needs a CUDA device, not " + dev.name());
  return std::make_unique<cuda_async_target>(*gpu);
}

#else  // no cuda.h at build time

std::unique_ptr<bench_target> make_cuda_async_target(device& dev) {
  throw usage_error("cudaMallocAsync needs a CUDA device, not " + dev.name() +
                    " (this build of vram has none: cuda.h was not found when it was built)");
}

#endif

}  // namespace vram::measure
