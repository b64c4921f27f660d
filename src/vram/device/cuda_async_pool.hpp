#pragma once
// CUDA's own stream-ordered allocator (cuMemAllocAsync / cuMemFreeAsync, what cudaMallocAsync and
// cudaFreeAsync call) on a device's default memory pool: what `vram bench` measures vram against
// (measure/cuda_async_target.hpp). It lives behind the device seam like every other driver call; it is not a
// device operation the pool uses, so it is a class of its own rather than a call of `device`.
//
// Decisions:
//  - The pool's release threshold is raised to its maximum while this object lives, so freed memory stays
//    cached in the pool, as a program tuned for it would set it; the threshold is put back afterwards, and the
//    pool trimmed to nothing, so the default pool is left as it was found.
//  - Each user thread has its own stream (a `stream`): non-blocking, so it never waits on the legacy default
//    stream, and made on the thread that uses it, where the device's primary context is made current.
//  - A stream synchronizes before it is destroyed: the frees it queued have completed before the pool is
//    trimmed.
//  - This header needs no CUDA header. Where cuda.h was not found at build time, opening one says so.

#include <cstddef>
#include <memory>

#include "vram/core/types.hpp"

namespace vram {

class device;

class cuda_async_pool {
 public:
  /// @brief The default memory pool of @p dev, which must be a cuda_device and outlive this object.
  /// @throws usage_error when @p dev is not a CUDA device (or this build has none); device_error when a
  /// driver call fails.
  explicit cuda_async_pool(device& dev);
  ~cuda_async_pool();
  cuda_async_pool(const cuda_async_pool&) = delete;
  cuda_async_pool& operator=(const cuda_async_pool&) = delete;

  struct state;

  /// One thread's stream on the pool. Made, used and destroyed on one thread.
  class stream {
   public:
    explicit stream(const cuda_async_pool& pool);
    ~stream();
    stream(const stream&) = delete;
    stream& operator=(const stream&) = delete;
    /// @brief cuMemAllocAsync of @p bytes on this stream. @throws out_of_memory; device_error.
    device_ptr allocate(std::size_t bytes);
    /// @brief cuMemFreeAsync of @p p on this stream. @throws device_error.
    void deallocate(device_ptr p);

   private:
    const state* pool_;
    void* stream_ = nullptr;  // a CUstream
  };

 private:
  std::unique_ptr<state> state_;
};

}  // namespace vram
