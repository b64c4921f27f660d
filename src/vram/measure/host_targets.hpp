#pragma once
// The bench targets that need no driver of their own: glibc's malloc/free (the host baseline), any vram
// memory_resource (vram's pool, or an emulation such as torch-native, optionally behind one mutex for those
// that are not thread-safe), and the device's legacy calls through the seam (cudaMalloc/cudaFree on a GPU).

#include <memory>
#include <string>

#include "vram/measure/bench_target.hpp"

namespace vram {
class device;
class memory_resource;
}  // namespace vram

namespace vram::measure {

/// @brief malloc and free of the C library; the blocks are never touched.
std::unique_ptr<bench_target> make_glibc_target();

/// @brief How a resource target is shared by threads.
enum class sharing {
  concurrent,  // the resource is thread-safe: threads call it at once
  mutex,       // the resource is not: every allocate and every deallocate takes one mutex shared by the threads
};

/// @brief allocate/deallocate of @p resource on stream 0, named @p name in the results. The target owns it.
/// pre: resource != nullptr.
std::unique_ptr<bench_target> make_resource_target(std::string name, std::unique_ptr<memory_resource> resource,
                                                   sharing how);

/// @brief legacy_malloc/legacy_free of @p dev through the seam (cudaMalloc/cudaFree on a GPU), named @p name.
/// @p dev must outlive the target.
std::unique_ptr<bench_target> make_legacy_target(std::string name, device& dev);

}  // namespace vram::measure
