#pragma once
// What every GPU test (tests/gpu_test.cpp) sets up: the CUDA device 0 behind the seam, the driver table, the
// device's primary context (so that other threads can make it current), the pattern kernels, and streams
// of its own; plus the knobs that make a run shorter (under compute-sanitizer) and a map of live blocks
// that catches a block handed out twice.
//
// Decisions:
//  - Streams are created CU_STREAM_NON_BLOCKING: the legacy default stream (0) never orders them, so work
//    on one stream really is in flight while another is used, as in a program with several streams.
//  - The session outlives whatever uses its streams: destroy resources and checkers first. Its destructor
//    waits for each stream before destroying it; the cuda_device (a member) then releases the context.
//  - Knobs, read from the environment once per call (a count of 0 or text that is not a number keeps the
//    default): VRAM_GPU_STEPS (steps of each policy's random run, default 3000), VRAM_GPU_THREAD_OPS
//    (operations of the threaded pool test, all threads together, default 120000) and VRAM_GPU_GATE_MS
//    (how long the gate kernel holds a stream at most, default 10000).

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/core/types.hpp"
#include "support/live_map.hpp"
#include "vram/device/cuda_driver.hpp"

#if VRAM_HAVE_CUDA_H
#include "support/gpu_pattern.hpp"
#include "vram/device/cuda_device.hpp"
#endif

namespace vram::gpu_check {

/// @brief The number in environment variable @p name, or @p fallback when it is unset, 0 or not a number.
inline std::uint64_t env_count(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  return (end == nullptr || *end != '\0' || v == 0) ? fallback : v;
}

inline std::uint64_t random_run_steps() { return env_count("VRAM_GPU_STEPS", 3000); }
inline std::uint64_t thread_operations() { return env_count("VRAM_GPU_THREAD_OPS", 120'000); }
inline std::uint64_t gate_limit_ns() { return env_count("VRAM_GPU_GATE_MS", 10'000) * 1'000'000; }

using test_support::live_map;

inline bool overlap(device_ptr a, std::size_t a_bytes, device_ptr b, std::size_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

#if VRAM_HAVE_CUDA_H

inline stream_id id_of(CUstream s) { return static_cast<stream_id>(reinterpret_cast<std::uintptr_t>(s)); }

/// @brief Runs a function when it goes out of scope. Declared after an allocator, a quiesce() in it lets the
/// allocator's destructor free memory that no queued kernel still uses, even when a test stops early.
template <class F>
class on_exit {
 public:
  explicit on_exit(F f) : f_(std::move(f)) {}
  ~on_exit() { f_(); }
  on_exit(const on_exit&) = delete;
  on_exit& operator=(const on_exit&) = delete;

 private:
  F f_;
};

/// @brief CUDA device 0, its context, the pattern kernels and streams. pre: cuda_available().
class session {
 public:
  session()
      : device_(std::make_unique<cuda_device>()), api_(vram::detail::load_cuda_api(nullptr)) {
    CUcontext c = nullptr;
    detail::check_call(*api_, api_->ctx_get_current(&c), "cuCtxGetCurrent");
    context_ = c;  // the primary context, made current by cuda_device's constructor
    kernels_ = std::make_unique<kernels>(*api_);
  }
  ~session() {
    api_->ctx_set_current(context_);  // no throw here: a failure leaves the streams to the context's end
    for (CUstream s : streams_) {
      api_->stream_synchronize(s);
      api_->stream_destroy(s);
    }
  }
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  cuda_device& dev() noexcept { return *device_; }
  const vram::detail::cuda_api& api() const noexcept { return *api_; }
  const kernels& pattern_kernels() const noexcept { return *kernels_; }

  /// @brief A new non-blocking stream, destroyed with the session.
  CUstream new_stream() {
    enter();
    CUstream s = nullptr;
    detail::check_call(*api_, api_->stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate(NON_BLOCKING)");
    streams_.push_back(s);
    return s;
  }
  /// @brief Makes the device's context current on the calling thread (call first in a new thread).
  void enter() const { detail::check_call(*api_, api_->ctx_set_current(context_), "cuCtxSetCurrent(primary)"); }

  /// @brief 4 bytes of device memory set to 0, outside any allocator under test; freed with free_word().
  CUdeviceptr new_word() {
    CUdeviceptr w = 0;
    detail::check_call(*api_, api_->mem_alloc(&w, 4), "cuMemAlloc(4)");
    detail::check_call(*api_, api_->memset_d32(w, 0, 1), "cuMemsetD32(word, 0)");
    // A memset of device memory may return before it is done, and the legacy stream it went to does not
    // order non-blocking streams: wait for it here.
    detail::check_call(*api_, api_->ctx_synchronize(), "cuCtxSynchronize");
    return w;
  }
  /// @brief Waits for all work on the device; never throws (for cleanup).
  void quiesce() const noexcept { api_->ctx_synchronize(); }
  void free_word(CUdeviceptr w) { detail::check_call(*api_, api_->mem_free(w), "cuMemFree(word)"); }

 private:
  std::unique_ptr<cuda_device> device_;
  const vram::detail::cuda_api* api_;
  CUcontext context_ = nullptr;
  std::unique_ptr<kernels> kernels_;
  std::vector<CUstream> streams_;
};

#endif  // VRAM_HAVE_CUDA_H

}  // namespace vram::gpu_check
