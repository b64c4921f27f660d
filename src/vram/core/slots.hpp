#pragma once
// Records kept in a vector and addressed by index, whose freed indexes are reused: the pool's handles and
// views (handle_map), the simulated device's pages of small blocks, the pickle reader's containers.

#include <vector>

namespace vram::detail {

/// @brief An index of @p slots to fill: the index @p freed gave back last (taken off it), or else a new
/// slot, value-initialised, at the end. What the slot holds is the caller's to set.
template <class T, class Index>
Index take_slot(std::vector<T>& slots, std::vector<Index>& freed) {
  if (!freed.empty()) {
    const Index s = freed.back();
    freed.pop_back();
    return s;
  }
  slots.emplace_back();
  return static_cast<Index>(slots.size() - 1);
}

}  // namespace vram::detail
