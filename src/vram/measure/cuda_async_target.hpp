#pragma once
// The bench target for CUDA's stream-ordered allocator: cuMemAllocAsync / cuMemFreeAsync (what
// cudaMallocAsync / cudaFreeAsync call) on the device's default memory pool, with the pool's release
// threshold raised to its maximum so freed memory stays cached in the pool, as a program tuned for it would
// set it. Each thread has its own non-blocking stream, so threads never order each other's calls.
//
// This is the one part of vram outside src/vram/device that calls the driver: the call measured is the
// driver's own, with no seam in between (the seam has no stream-ordered allocation). It uses the same
// run-time driver table (cuda_driver.hpp) and the cuda_device's primary context.

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
