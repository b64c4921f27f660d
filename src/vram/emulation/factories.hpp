#pragma once
// The factory of each allocator emulation, for the policy registry. Each is defined beside its resource.

#include <memory>

#include "vram/resource/memory_resource.hpp"
#include "vram/resource/policy_options.hpp"

namespace vram {

std::unique_ptr<memory_resource> make_cuda_direct_resource(device& dev, const policy_options& options);
std::unique_ptr<memory_resource> make_torch_native_resource(device& dev, const policy_options& options);
std::unique_ptr<memory_resource> make_torch_expandable_resource(device& dev, const policy_options& options);
std::unique_ptr<memory_resource> make_rmm_pool_resource(device& dev, const policy_options& options);
std::unique_ptr<memory_resource> make_cub_bins_resource(device& dev, const policy_options& options);

}  // namespace vram
