#pragma once
// The CUDA device: the device seam over a real GPU, through the driver API opened at run time
// (cuda_driver.hpp). This header needs no CUDA header; the class is built only where cuda.h was found
// (VRAM_HAVE_CUDA_H=1), and open_device() ("cuda", "cuda:N", "auto") is the usual way to get one.
//
// What it does per call of the seam:
//  - the device's primary context is retained once, and made current on the calling thread when it is not
//    (cuCtxGetCurrent first: a cheap check), so any thread may call;
//  - lack of memory (CUDA_ERROR_OUT_OF_MEMORY from cuMemAlloc or cuMemCreate) returns 0; every other
//    failure throws device_error naming the call, its arguments and the driver's error name and text, e.g.
//    "cuMemMap(va=0x7f0000000000, 2097152 bytes, handle=0x5) failed: CUDA_ERROR_INVALID_VALUE (invalid argument)";
//  - each driver call of a counted kind adds its measured time (steady_clock around the call) to calls(),
//    whether it succeeded or not; the counters are updated under a mutex.
// Streams are CUstream handles passed as stream_id (0 = the legacy default stream); events are CUevents
// created with CU_EVENT_DISABLE_TIMING, passed as event_id. Physical memory is pinned device memory on this
// device; set_access grants read/write to this device and to the peers named in the options.

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "vram/device/cuda_driver.hpp"
#include "vram/device/device.hpp"

struct CUctx_st;  // CUcontext, as cuda.h declares it

namespace vram {

namespace detail {
struct cuda_api;
struct cuda_holdings;
}  // namespace detail

struct cuda_device_options {
  int index = 0;           // the CUDA device ordinal
  std::vector<int> peers;  // other devices that set_access also makes read/write (they need peer access)
};

class cuda_device final : public device {
 public:
  /// @brief Opens device options.index: retains its primary context and reads its properties.
  /// @throws usage_error when CUDA is not available here or there is no such device (the message says why);
  /// device_error when a driver call fails.
  explicit cuda_device(cuda_device_options options = {});
  /// @brief Releases the primary context (what was allocated through it is the caller's to free first).
  ~cuda_device() override;
  cuda_device(const cuda_device&) = delete;
  cuda_device& operator=(const cuda_device&) = delete;

  /// @brief E.g. "NVIDIA H200 (cuda:0, 143771 MiB, 2 MiB granules)".
  std::string name() const override;
  /// @brief cuMemGetAllocationGranularity (minimum) for pinned memory on this device, read once.
  std::size_t granularity() const override { return granularity_; }
  memory_info mem_info() override;
  bool simulated() const noexcept override { return false; }

  device_ptr legacy_malloc(std::size_t bytes) override;
  void legacy_free(device_ptr p) override;

  device_ptr address_reserve(std::size_t bytes, std::size_t alignment = 0) override;
  void address_free(device_ptr va, std::size_t bytes) override;
  phys_handle mem_create(std::size_t bytes) override;
  void mem_release(phys_handle h) override;
  void mem_map(device_ptr va, std::size_t bytes, phys_handle h) override;
  void mem_unmap(device_ptr va, std::size_t bytes) override;
  void set_access(device_ptr va, std::size_t bytes) override;

  event_id event_create() override;
  void event_destroy(event_id e) override;
  void event_record(event_id e, stream_id s) override;
  void stream_wait_event(stream_id s, event_id e) override;
  bool event_query(event_id e) override;
  void event_synchronize(event_id e) override;
  void stream_synchronize(stream_id s) override;
  void device_synchronize() override;

  // What `vram info` shows.
  /// @brief The GPU's name as the driver gives it, e.g. "NVIDIA H200".
  const std::string& gpu_name() const noexcept { return gpu_name_; }
  /// @brief Compute capability (major, minor), e.g. (9, 0) for Hopper.
  std::pair<int, int> compute_capability() const noexcept { return {cc_major_, cc_minor_}; }
  /// @brief cuDriverGetVersion: 1000 * major + 10 * minor, e.g. 13000 for CUDA 13.0.
  int driver_version() const noexcept { return driver_version_; }
  /// @brief cuDeviceTotalMem: the device's memory in bytes.
  std::size_t total_memory() const noexcept { return total_memory_; }
  int index() const noexcept { return options_.index; }
  /// @brief Bytes of legacy blocks and physical handles made through this object and not yet given back.
  std::size_t held_bytes() const;

  /// @brief Checks the context, granularity, access list and the held-bytes bookkeeping; throws
  /// invariant_error naming the broken invariant.
  void validate() const;

 private:
  void make_current() const;
  void count(device_call kind, std::uint64_t ns);

  cuda_device_options options_;
  const detail::cuda_api* api_ = nullptr;
  int device_ = 0;  // CUdevice
  CUctx_st* context_ = nullptr;
  std::string gpu_name_;
  int cc_major_ = 0;
  int cc_minor_ = 0;
  int driver_version_ = 0;
  std::size_t total_memory_ = 0;
  std::size_t granularity_ = 0;
  std::unique_ptr<detail::cuda_holdings> holdings_;  // live blocks and handles, and the access list
  mutable std::mutex mutex_;                         // guards calls_ and holdings_
};

}  // namespace vram
