// Names of trace actions, as the PyTorch-style CSV spells them. The table is indexed by the enum's value,
// so the order here follows trace.hpp.

#include "vram/trace/trace.hpp"

#include <array>

namespace vram {

namespace detail {
constexpr std::array<std::string_view, 9> action_names = {
    "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map", "segment_unmap",
    "oom",   "snapshot",
};
}  // namespace detail

std::string_view to_string(trace_action a) noexcept {
  const auto i = static_cast<std::size_t>(a);
  return i < detail::action_names.size() ? detail::action_names[i] : std::string_view{"unknown"};
}

}  // namespace vram
