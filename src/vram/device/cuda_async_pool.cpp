// CUDA's stream-ordered pool (cuda_async_pool.hpp), through the run-time driver table (cuda_driver.hpp) and
// the cuda_device's ordinal; the context is the device's primary one, retained for the object's life.
#include "vram/device/cuda_async_pool.hpp"

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/device.hpp"

#if VRAM_HAVE_CUDA_H
#include "vram/device/cuda_device.hpp"
#include "vram/device/cuda_driver.hpp"
#endif

namespace vram {

#if VRAM_HAVE_CUDA_H

namespace {

void check(const detail::cuda_api& api, CUresult r, std::string_view call) {
  if (r != CUDA_SUCCESS) throw device_error(fmt::format("{} failed: {}", call, detail::cuda_error_text(api, r)));
}

}  // namespace

struct cuda_async_pool::state {
  const detail::cuda_api* api = nullptr;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUmemoryPool pool = nullptr;
  cuuint64_t saved_threshold = 0;
};

cuda_async_pool::cuda_async_pool(device& dev) : state_(std::make_unique<state>()) {
  auto* gpu = dynamic_cast<cuda_device*>(&dev);
  if (gpu == nullptr) throw usage_error("cudaMallocAsync needs a CUDA device, not " + dev.name());
  std::string why;
  state_->api = detail::load_cuda_api(&why);
  if (state_->api == nullptr) throw usage_error("cudaMallocAsync: CUDA is not available: " + why);
  const auto& api = *state_->api;
  state& s = *state_;
  check(api, api.device_get(&s.device, gpu->index()), fmt::format("cuDeviceGet({})", gpu->index()));
  check(api, api.primary_ctx_retain(&s.ctx, s.device), "cuDevicePrimaryCtxRetain");
  try {
    check(api, api.ctx_set_current(s.ctx), "cuCtxSetCurrent");
    check(api, api.device_get_default_mem_pool(&s.pool, s.device), "cuDeviceGetDefaultMemPool");
    check(api, api.mem_pool_get_attribute(s.pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &s.saved_threshold),
          "cuMemPoolGetAttribute(RELEASE_THRESHOLD)");
    cuuint64_t most = ~cuuint64_t{0};
    check(api, api.mem_pool_set_attribute(s.pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &most),
          "cuMemPoolSetAttribute(RELEASE_THRESHOLD, max)");
  } catch (...) {
    api.primary_ctx_release(s.device);
    throw;
  }
}

cuda_async_pool::~cuda_async_pool() {
  const auto& api = *state_->api;
  api.ctx_set_current(state_->ctx);
  api.mem_pool_trim_to(state_->pool, 0);
  api.mem_pool_set_attribute(state_->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &state_->saved_threshold);
  api.primary_ctx_release(state_->device);
}

cuda_async_pool::stream::stream(const cuda_async_pool& pool) : pool_(pool.state_.get()) {
  const auto& api = *pool_->api;
  CUcontext current = nullptr;
  if (api.ctx_get_current(&current) != CUDA_SUCCESS || current != pool_->ctx) {
    check(api, api.ctx_set_current(pool_->ctx), "cuCtxSetCurrent");
  }
  CUstream s = nullptr;
  check(api, api.stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate(non-blocking)");
  stream_ = s;
}

cuda_async_pool::stream::~stream() {
  const auto& api = *pool_->api;
  api.stream_synchronize(static_cast<CUstream>(stream_));
  api.stream_destroy(static_cast<CUstream>(stream_));
}

device_ptr cuda_async_pool::stream::allocate(std::size_t bytes) {
  CUdeviceptr p = 0;
  const CUresult r = pool_->api->mem_alloc_async(&p, bytes, static_cast<CUstream>(stream_));
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    throw out_of_memory(fmt::format("cuMemAllocAsync({}) failed: out of memory", format_bytes(bytes)));
  }
  check(*pool_->api, r, fmt::format("cuMemAllocAsync({} bytes)", bytes));
  return p;
}

void cuda_async_pool::stream::deallocate(device_ptr p) {
  if (const CUresult r = pool_->api->mem_free_async(p, static_cast<CUstream>(stream_)); r != CUDA_SUCCESS) {
    check(*pool_->api, r, fmt::format("cuMemFreeAsync(0x{:x})", p));
  }
}

#else  // no cuda.h at build time

struct cuda_async_pool::state {};

cuda_async_pool::cuda_async_pool(device& dev) {
  throw usage_error("cudaMallocAsync needs a CUDA device, not " + dev.name() +
                    " (this build of vram has none: cuda.h was not found when it was built)");
}

cuda_async_pool::~cuda_async_pool() = default;

cuda_async_pool::stream::stream(const cuda_async_pool& pool) : pool_(pool.state_.get()) {}
cuda_async_pool::stream::~stream() = default;
device_ptr cuda_async_pool::stream::allocate(std::size_t) { return 0; }
void cuda_async_pool::stream::deallocate(device_ptr) {}

#endif

}  // namespace vram
