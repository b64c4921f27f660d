#pragma once
// The bench target for CUDA's stream-ordered allocator: cuMemAllocAsync / cuMemFreeAsync (what
// cudaMallocAsync / cudaFreeAsync call) on the device's default memory pool, with the pool's release
// threshold raised to its maximum so freed memory stays cached in the pool, as a program tuned for it would
// set it. Each thread has its own non-blocking stream, so threads never order each other's calls.
//
// The driver calls are device/cuda_async_pool's: each pair is one cuMemAllocAsync and one cuMemFreeAsync,
// through the same run-time driver table as the cuda_device, with nothing added but a direct call.

#include <memory>

#include "vram/measure/bench_target.hpp"

namespace vram {
class device;
}

namespace vram::measure {

/// @brief "cudaMallocAsync" over @p dev, which must be a cuda_device and outlive the target. Setting up
/// reads the pool's release threshold and sets it to the maximum; the target puts it back, after trimming
/// the pool to nothing, when it goes.
/// @throws usage_error when @p dev is not a CUDA device (or this build has none); device_error when a
/// driver call fails.
std::unique_ptr<bench_target> make_cuda_async_target(device& dev);

}  // namespace vram::measure
