#pragma once
// Live blocks by start address, [start, start + bytes): the tests' check that an allocator never hands out
// a block that overlaps one still live. Used by the CPU conformance and pool tests and by the GPU tests.

#include <cstddef>
#include <iterator>
#include <map>

#include "vram/core/error.hpp"
#include "vram/core/types.hpp"

namespace vram::test_support {

class live_map {
 public:
  /// @brief Adds a block; false (and nothing added) when it overlaps a live block.
  bool add(device_ptr p, std::size_t bytes) {
    auto next = blocks_.lower_bound(p);
    if (next != blocks_.end() && next->first < p + bytes) return false;
    if (next != blocks_.begin() && std::prev(next)->first + std::prev(next)->second > p) return false;
    blocks_.emplace_hint(next, p, bytes);
    return true;
  }
  /// @brief Forgets a block; false when it was not live.
  bool remove(device_ptr p) { return blocks_.erase(p) == 1; }
  std::size_t size() const noexcept { return blocks_.size(); }
  /// @brief Throws invariant_error when two blocks overlap or one is empty.
  void validate() const {
    device_ptr end = 0;
    for (const auto& [p, bytes] : blocks_) {
      if (bytes == 0 || p < end) throw invariant_error("live_map: a block is empty or overlaps the one before it");
      end = p + bytes;
    }
  }

 private:
  std::map<device_ptr, std::size_t> blocks_;
};

}  // namespace vram::test_support
