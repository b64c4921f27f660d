#pragma once
// A set of disjoint free address ranges, coalesced, with best-fit search: the free list of vram's pool
// (mapped free memory) and of its address space (unmapped granules), and the simulated device's free
// address ranges (legacy blocks and reservations). Two indexes over the same ranges:
// by address (to coalesce and to carve) and by (size, address) (to find the smallest range that fits,
// lowest address first, which keeps live data packed low). O(log n) per operation.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "vram/core/types.hpp"

namespace vram::detail {

class range_set {
 public:
  /// @brief Adds [addr, addr + size), merging with neighbours. pre: it overlaps no range in the set.
  void insert(device_ptr addr, std::size_t size);
  /// @brief Removes [addr, addr + size). pre: it lies inside one range of the set.
  void erase(device_ptr addr, std::size_t size);
  /// @brief Takes the smallest range (lowest address on ties) that holds @p size bytes at an address that is a
  /// multiple of @p align, carves the block from it and returns the block's address; none when no range fits.
  std::optional<device_ptr> take_best_fit(std::size_t size, std::size_t align = 512);
  /// @brief Removes whatever part of the set lies in [addr, addr + size); returns the bytes removed.
  std::size_t erase_within(device_ptr addr, std::size_t size);
  /// @brief Calls fn(addr, size) for each range of at least @p size bytes, smallest first (lowest address on
  /// ties), until fn returns false.
  template <class F>
  void for_each_fit(std::size_t size, F&& fn) const {
    for (auto it = by_size_.lower_bound({size, 0}); it != by_size_.end(); ++it)
      if (!fn(it->addr, it->size)) return;
  }
  /// @brief Calls fn(addr, size) for each range, largest first (highest address on ties), until fn returns
  /// false.
  template <class F>
  void for_each_largest(F&& fn) const {
    for (auto it = by_size_.rbegin(); it != by_size_.rend(); ++it)
      if (!fn(it->addr, it->size)) return;
  }
  /// @brief Whether any range of the set meets [addr, addr + size).
  bool overlaps(device_ptr addr, std::size_t size) const;
  /// @brief Where take_best_fit would place @p size bytes, without taking them.
  std::optional<device_ptr> find_best_fit(std::size_t size, std::size_t align = 512) const;
  /// @brief The range containing @p addr, if any.
  std::optional<std::pair<device_ptr, std::size_t>> containing(device_ptr addr) const;

  std::size_t total() const noexcept { return total_; }
  std::size_t largest() const noexcept { return by_size_.empty() ? 0 : by_size_.rbegin()->size; }
  std::size_t count() const noexcept { return by_addr_.size(); }
  bool empty() const noexcept { return by_addr_.empty(); }
  const std::map<device_ptr, std::size_t>& ranges() const noexcept { return by_addr_; }

  /// @brief Checks that the indexes agree, ranges are disjoint and coalesced, and total is their sum.
  void validate() const;

 private:
  void add(device_ptr addr, std::size_t size);
  void remove(std::map<device_ptr, std::size_t>::iterator it);
  // Makes the range at it [addr, addr + size), moving its nodes in both indexes rather than freeing and
  // allocating them: a carve or a merge changes one range far more often than it adds or removes one.
  void reset(std::map<device_ptr, std::size_t>::iterator it, device_ptr addr, std::size_t size);

  // A range in the size index. Its members are mutable so that reset() can change a key in place where the
  // order stays the same; nothing else writes them.
  struct size_key {
    mutable std::size_t size;
    mutable device_ptr addr;
    bool operator<(const size_key& o) const noexcept { return size != o.size ? size < o.size : addr < o.addr; }
  };

  std::map<device_ptr, std::size_t> by_addr_;
  std::set<size_key> by_size_;
  std::size_t total_ = 0;
};

}  // namespace vram::detail
