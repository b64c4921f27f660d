#pragma once
// The settings of an allocation policy, key to value, as written after the ':' of a policy spec
// ("vram:max_handle=16MiB;reserve_ratio=1.1"). Each allocator's options read them (pool_options::with, the
// emulations' factories); the registry of policies (policies/registry.hpp) parses specs into them.

#include <functional>
#include <map>
#include <string>

namespace vram {

/// @brief Settings of a policy, key to value, as written after the ':' of a spec.
using policy_options = std::map<std::string, std::string, std::less<>>;

}  // namespace vram
