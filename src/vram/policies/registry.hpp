#pragma once
// The table of allocation policies by name: what `--policy` accepts. A policy spec is a name with optional
// settings: "torch-native" or "torch-native:max_split_size_mb=128;garbage_collection_threshold=0.8", or in
// PyTorch's own syntax, as PYTORCH_CUDA_ALLOC_CONF writes it: "torch-native:max_split_size_mb:128,
// expandable_segments:True". The composition root of the allocators: above resource/, pool/ and emulation/,
// which it puts together, and below replay/, report/ and the tools, which name policies.

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vram/resource/memory_resource.hpp"
#include "vram/resource/policy_options.hpp"

namespace vram {

struct policy_info {
  std::string_view name;
  std::string_view summary;  // one line: what this allocator is
  std::function<std::unique_ptr<memory_resource>(device&, const policy_options&)> make;
};

/// @brief Every policy vram knows, in the order reports list them.
std::span<const policy_info> policies();

/// @brief Makes the allocator a spec names, over @p dev.
/// @throws usage_error for an unknown name or setting (the message lists the known ones).
std::unique_ptr<memory_resource> make_resource(std::string_view spec, device& dev);

/// @brief Splits "a,b,c" into specs, checking each name; an item in PyTorch's "key:value" syntax that follows
/// a spec with settings is one more setting of that spec. @throws usage_error for an unknown name.
std::vector<std::string> parse_policy_list(std::string_view list);

/// @brief Makes each spec once over a simulated device and drops it, so that a bad setting
/// ("vram:block_handles=abc") fails before a command opens a GPU or reads a trace. @throws usage_error.
void check_policy_settings(const std::vector<std::string>& specs);

}  // namespace vram
