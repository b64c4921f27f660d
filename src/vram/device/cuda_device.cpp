// The CUDA device (see cuda_device.hpp for what each call does).
// Decisions:
//  - One driver call per seam call, plus at most a cuCtxSetCurrent when the calling thread has another
//    context current. Properties (name, capability, memory, granularity) are read once, in the constructor.
//  - Error messages are built only on failure; the driver names the error (cuGetErrorName/String).
//  - Timing: steady_clock around the driver call alone; the counters and the bookkeeping of what this
//    object holds (for held_bytes() and validate()) share one mutex, taken after the driver call returns,
//    so driver calls from several threads run concurrently.
//  - The bookkeeping draws its map nodes from a pool, so a steady stream of calls allocates no host memory.
//  - The whole file is empty where cuda.h was not found at build time.
#include "vram/device/cuda_device.hpp"

#if VRAM_HAVE_CUDA_H

#include <chrono>
#include <cstdint>
#include <memory_resource>
#include <unordered_map>

#include <fmt/format.h>

#include "vram/core/error.hpp"

namespace vram {
namespace detail {

/// @brief What a cuda_device has handed out and not yet taken back.
struct cuda_holdings {
  std::pmr::unsynchronized_pool_resource pool;
  std::pmr::unordered_map<device_ptr, std::size_t> blocks{&pool};    // legacy blocks: bytes asked for
  std::pmr::unordered_map<phys_handle, std::size_t> handles{&pool};  // handles not yet released
  std::size_t block_bytes = 0;
  std::size_t handle_bytes = 0;
  std::vector<CUmemAccessDesc> access;  // this device first, then the peers
};

namespace {

std::uint64_t since(std::chrono::steady_clock::time_point t0) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

CUstream to_stream(stream_id s) { return reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(s)); }
CUevent to_event(event_id e) { return reinterpret_cast<CUevent>(static_cast<std::uintptr_t>(e)); }

CUmemAllocationProp pinned_on(int index) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = index;
  return prop;
}

}  // namespace
}  // namespace detail

namespace {

/// @brief Throws device_error for a failed call; @p call describes it ("cuMemFree(0x7f...)").
template <class Describe>
void check(const detail::cuda_api& api, CUresult r, Describe&& call) {
  if (r != CUDA_SUCCESS) throw device_error(fmt::format("{} failed: {}", call(), detail::cuda_error_text(api, r)));
}

std::string hex(std::uint64_t v) { return fmt::format("0x{:x}", v); }

}  // namespace

cuda_device::cuda_device(cuda_device_options options)
    : options_(std::move(options)), holdings_(std::make_unique<detail::cuda_holdings>()) {
  std::string why;
  if (!cuda_available(&why)) throw usage_error("CUDA is not available: " + why);
  api_ = detail::load_cuda_api(nullptr);
  const auto& api = *api_;
  int count = 0;
  check(api, api.device_get_count(&count), [] { return std::string("cuDeviceGetCount"); });
  const int n = options_.index;
  if (n < 0 || n >= count) {
    throw usage_error(fmt::format("no CUDA device {}: the driver counts {} (cuda:0 to cuda:{})", n, count, count - 1));
  }
  for (int peer : options_.peers) {
    if (peer < 0 || peer >= count || peer == n) {
      throw usage_error(fmt::format("bad peer device {} for cuda:{} (the driver counts {})", peer, n, count));
    }
  }
  CUdevice dev = 0;
  check(api, api.device_get(&dev, n), [&] { return fmt::format("cuDeviceGet({})", n); });
  device_ = dev;
  char name[256] = {};
  check(api, api.device_get_name(name, sizeof name - 1, dev), [&] { return fmt::format("cuDeviceGetName({})", n); });
  gpu_name_ = name;
  check(api, api.device_get_attribute(&cc_major_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
        [&] { return fmt::format("cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR, {})", n); });
  check(api, api.device_get_attribute(&cc_minor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
        [&] { return fmt::format("cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR, {})", n); });
  check(api, api.device_total_mem(&total_memory_, dev), [&] { return fmt::format("cuDeviceTotalMem({})", n); });
  check(api, api.driver_get_version(&driver_version_), [] { return std::string("cuDriverGetVersion"); });

  const CUmemAllocationProp prop = detail::pinned_on(n);
  check(api, api.mem_get_allocation_granularity(&granularity_, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        [&] { return fmt::format("cuMemGetAllocationGranularity(pinned, device {}, minimum)", n); });

  CUcontext ctx = nullptr;
  check(api, api.primary_ctx_retain(&ctx, dev), [&] { return fmt::format("cuDevicePrimaryCtxRetain({})", n); });
  context_ = ctx;
  try {
    make_current();
  } catch (...) {
    api.primary_ctx_release(dev);
    throw;
  }

  auto grant = [](int device_index) {
    CUmemAccessDesc d{};
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = device_index;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return d;
  };
  holdings_->access.push_back(grant(n));
  for (int peer : options_.peers) holdings_->access.push_back(grant(peer));
}

cuda_device::~cuda_device() {
  if (api_ != nullptr && context_ != nullptr) api_->primary_ctx_release(device_);
}

std::string cuda_device::name() const {
  return fmt::format("{} (cuda:{}, {} MiB, {} MiB granules)", gpu_name_, options_.index, total_memory_ / MiB,
                     granularity_ / MiB);
}

void cuda_device::make_current() const {
  CUcontext current = nullptr;
  if (api_->ctx_get_current(&current) == CUDA_SUCCESS && current == context_) return;
  check(*api_, api_->ctx_set_current(context_), [&] { return fmt::format("cuCtxSetCurrent(cuda:{})", options_.index); });
}

void cuda_device::count(device_call kind, std::uint64_t ns) {
  std::lock_guard lock(mutex_);
  calls_.add(kind, ns);
}

memory_info cuda_device::mem_info() {
  make_current();
  memory_info m;
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->mem_get_info(&m.free, &m.total);
  count(device_call::mem_get_info, detail::since(t0));
  check(*api_, r, [] { return std::string("cuMemGetInfo"); });
  return m;
}

// ---- legacy allocation ----------------------------------------------------------------------------------

device_ptr cuda_device::legacy_malloc(std::size_t bytes) {
  if (bytes == 0) return 0;
  make_current();
  CUdeviceptr p = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->mem_alloc(&p, bytes);
  count(device_call::legacy_malloc, detail::since(t0));
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return 0;
  check(*api_, r, [&] { return fmt::format("cuMemAlloc({} bytes)", bytes); });
  std::lock_guard lock(mutex_);
  holdings_->blocks.emplace(p, bytes);
  holdings_->block_bytes += bytes;
  return p;
}

void cuda_device::legacy_free(device_ptr p) {
  make_current();
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->mem_free(p);
  count(device_call::legacy_free, detail::since(t0));
  check(*api_, r, [&] { return fmt::format("cuMemFree({})", hex(p)); });
  std::lock_guard lock(mutex_);
  if (auto it = holdings_->blocks.find(p); it != holdings_->blocks.end()) {
    holdings_->block_bytes -= it->second;
    holdings_->blocks.erase(it);
  }
}

// ---- the virtual memory API -----------------------------------------------------------------------------

device_ptr cuda_device::address_reserve(std::size_t bytes, std::size_t alignment) {
  make_current();
  CUdeviceptr va = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->mem_address_reserve(&va, bytes, alignment, 0, 0);
  count(device_call::address_reserve, detail::since(t0));
  check(*api_, r, [&] { return fmt::format("cuMemAddressReserve({} bytes, alignment {})", bytes, alignment); });
  return va;
}

void cuda_device::address_free(device_ptr va, std::size_t bytes) {
  make_current();
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->mem_address_free(va, bytes);
  count(device_call::address_free, detail::since(t0));
  check(*api_, r, [&] { return fmt::format("cuMemAddressFree(va={}, {} bytes)", hex(va), bytes); });
}

phys_handle cuda_device::mem_create(std::size_t bytes) {
  make_current();
  const CUmemAllocationProp prop = detail::pinned_on(options_.index);
  CUmemGenericAllocationHandle h = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->mem_create(&h, bytes, &prop, 0);
  count(device_call::mem_create, detail::since(t0));
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return 0;
  check(*api_, r, [&] { return fmt::format("cuMemCreate({} bytes, pinned on device {})", bytes, options_.index); });
  std::lock_guard lock(mutex_);
  holdings_->handles.emplace(h, bytes);
  holdings_->handle_bytes += bytes;
  return h;
}

void cuda_device::mem_release(phys_handle h) {
  make_current();
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->mem_release(h);
  count(device_call::mem_release, detail::since(t0));
  check(*api_, r, [&] { return fmt::format("cuMemRelease(handle={})", hex(h)); });
  std::lock_guard lock(mutex_);
  if (auto it = holdings_->handles.find(h); it != holdings_->handles.end()) {
    holdings_->handle_bytes -= it->second;
    holdings_->handles.erase(it);
  }
}

void cuda_device::mem_map(device_ptr va, std::size_t bytes, phys_handle h) {
  make_current();
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->mem_map(va, bytes, 0, h, 0);
  count(device_call::mem_map, detail::since(t0));
  check(*api_, r, [&] { return fmt::format("cuMemMap(va={}, {} bytes, handle={})", hex(va), bytes, hex(h)); });
}

void cuda_device::mem_unmap(device_ptr va, std::size_t bytes) {
  make_current();
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->mem_unmap(va, bytes);
  count(device_call::mem_unmap, detail::since(t0));
  check(*api_, r, [&] { return fmt::format("cuMemUnmap(va={}, {} bytes)", hex(va), bytes); });
}

void cuda_device::set_access(device_ptr va, std::size_t bytes) {
  make_current();
  const auto& access = holdings_->access;  // fixed after construction: read without the lock
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->mem_set_access(va, bytes, access.data(), access.size());
  count(device_call::set_access, detail::since(t0));
  check(*api_, r, [&] {
    return fmt::format("cuMemSetAccess(va={}, {} bytes, read/write for {} device(s))", hex(va), bytes, access.size());
  });
}

// ---- streams and events ---------------------------------------------------------------------------------

event_id cuda_device::event_create() {
  make_current();
  CUevent e = nullptr;
  check(*api_, api_->event_create(&e, CU_EVENT_DISABLE_TIMING),
        [] { return std::string("cuEventCreate(CU_EVENT_DISABLE_TIMING)"); });
  return static_cast<event_id>(reinterpret_cast<std::uintptr_t>(e));
}

void cuda_device::event_destroy(event_id e) {
  make_current();
  check(*api_, api_->event_destroy(detail::to_event(e)), [&] { return fmt::format("cuEventDestroy({})", hex(e)); });
}

void cuda_device::event_record(event_id e, stream_id s) {
  make_current();
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->event_record(detail::to_event(e), detail::to_stream(s));
  count(device_call::event_record, detail::since(t0));
  check(*api_, r, [&] { return fmt::format("cuEventRecord(event={}, stream={})", hex(e), hex(s)); });
}

void cuda_device::stream_wait_event(stream_id s, event_id e) {
  make_current();
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->stream_wait_event(detail::to_stream(s), detail::to_event(e), 0);
  count(device_call::stream_wait_event, detail::since(t0));
  check(*api_, r, [&] { return fmt::format("cuStreamWaitEvent(stream={}, event={})", hex(s), hex(e)); });
}

bool cuda_device::event_query(event_id e) {
  make_current();
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->event_query(detail::to_event(e));
  count(device_call::event_query, detail::since(t0));
  if (r == CUDA_ERROR_NOT_READY) return false;
  check(*api_, r, [&] { return fmt::format("cuEventQuery({})", hex(e)); });
  return true;
}

void cuda_device::event_synchronize(event_id e) {
  make_current();
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->event_synchronize(detail::to_event(e));
  count(device_call::event_synchronize, detail::since(t0));
  check(*api_, r, [&] { return fmt::format("cuEventSynchronize({})", hex(e)); });
}

void cuda_device::stream_synchronize(stream_id s) {
  make_current();
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->stream_synchronize(detail::to_stream(s));
  count(device_call::stream_synchronize, detail::since(t0));
  check(*api_, r, [&] { return fmt::format("cuStreamSynchronize({})", hex(s)); });
}

void cuda_device::device_synchronize() {
  make_current();
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = api_->ctx_synchronize();
  count(device_call::device_synchronize, detail::since(t0));
  check(*api_, r, [&] { return fmt::format("cuCtxSynchronize(cuda:{})", options_.index); });
}

// ---- bookkeeping ----------------------------------------------------------------------------------------

std::size_t cuda_device::held_bytes() const {
  std::lock_guard lock(mutex_);
  return holdings_->block_bytes + holdings_->handle_bytes;
}

void cuda_device::validate() const {
  auto fail = [](const std::string& what) { throw invariant_error("cuda_device: " + what); };
  if (api_ == nullptr || context_ == nullptr) fail("no driver table or no primary context");
  if (granularity_ == 0 || (granularity_ & (granularity_ - 1)) != 0) {
    fail(fmt::format("granularity {} is not a power of two", granularity_));
  }
  std::lock_guard lock(mutex_);
  const auto& h = *holdings_;
  if (h.access.size() != options_.peers.size() + 1 || h.access.front().location.id != options_.index) {
    fail("the access list is not this device followed by its peers");
  }
  std::size_t blocks = 0;
  for (const auto& [p, bytes] : h.blocks) {
    if (p == 0 || bytes == 0) fail(fmt::format("a held block {} of {} bytes", hex(p), bytes));
    blocks += bytes;
  }
  if (blocks != h.block_bytes) fail(fmt::format("block bytes {} != sum of held blocks {}", h.block_bytes, blocks));
  std::size_t handles = 0;
  for (const auto& [handle, bytes] : h.handles) {
    if (bytes == 0 || bytes % granularity_ != 0) fail(fmt::format("handle {} of {} bytes", hex(handle), bytes));
    handles += bytes;
  }
  if (handles != h.handle_bytes) fail(fmt::format("handle bytes {} != sum of held handles {}", h.handle_bytes, handles));
}

}  // namespace vram

#endif  // VRAM_HAVE_CUDA_H
