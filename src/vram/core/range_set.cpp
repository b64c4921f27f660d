// Coalescing best-fit free ranges.
#include "vram/core/range_set.hpp"
#include "vram/core/assert.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vram/core/error.hpp"

namespace vram::detail {

void range_set::add(device_ptr addr, std::size_t size) {
  by_addr_.emplace(addr, size);
  by_size_.insert(size_key{size, addr});
  total_ += size;
}

void range_set::remove(std::map<device_ptr, std::size_t>::iterator it) {
  by_size_.erase(size_key{it->second, it->first});
  total_ -= it->second;
  by_addr_.erase(it);
}

void range_set::reset(std::map<device_ptr, std::size_t>::iterator it, device_ptr addr, std::size_t size) {
  const size_key now{size, addr};
  const auto s = by_size_.find({it->second, it->first});
  total_ = total_ - it->second + size;
  if (it->first == addr) {
    it->second = size;  // same key: only the length changes
  } else {
    // The ranges are disjoint and this one changes within its own bounds and the gaps beside it, so it keeps
    // its place by address: the node goes back where it was, next to its successor, with no search.
    const auto next = std::next(it);
    auto by_addr = by_addr_.extract(it);
    by_addr.key() = addr;
    by_addr.mapped() = size;
    by_addr_.insert(next, std::move(by_addr));
  }
  // By size it keeps its place too where the new key still lies between its neighbours' (more than half the
  // resets in a training step's replay): then the key changes in place.
  const auto after = std::next(s);
  if ((s == by_size_.begin() || *std::prev(s) < now) && (after == by_size_.end() || now < *after)) {
    s->size = size;
    s->addr = addr;
    return;
  }
  auto by_size = by_size_.extract(s);
  by_size.value() = now;
  by_size_.insert(std::move(by_size));
}

void range_set::insert(device_ptr addr, std::size_t size) {
  if (size == 0) return;
  auto next = by_addr_.lower_bound(addr);
  VRAM_ASSERT(next == by_addr_.end() || addr + size <= next->first, "range_set::insert: overlaps the next range");
  VRAM_ASSERT(next == by_addr_.begin() || std::prev(next)->first + std::prev(next)->second <= addr,
              "range_set::insert: overlaps the previous range");
  const bool joins_next = next != by_addr_.end() && addr + size == next->first;
  if (next != by_addr_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == addr) {
      std::size_t merged = prev->second + size;
      if (joins_next) {
        merged += next->second;
        remove(next);
      }
      reset(prev, prev->first, merged);
      return;
    }
  }
  if (joins_next) {
    reset(next, addr, size + next->second);
    return;
  }
  add(addr, size);
}

void range_set::erase(device_ptr addr, std::size_t size) {
  if (size == 0) return;
  auto it = by_addr_.upper_bound(addr);
  if (it == by_addr_.begin()) throw invariant_error(fmt::format("range_set::erase({:#x}, {}): not free", addr, size));
  --it;
  const device_ptr start = it->first;
  const std::size_t len = it->second;
  if (addr + size > start + len)
    throw invariant_error(fmt::format("range_set::erase({:#x}, {}): not inside one free range", addr, size));
  const bool before = addr > start, after = addr + size < start + len;
  if (before) {
    reset(it, start, addr - start);
    if (after) add(addr + size, start + len - (addr + size));
  } else if (after) {
    reset(it, addr + size, start + len - (addr + size));
  } else {
    remove(it);
  }
}

std::size_t range_set::erase_within(device_ptr addr, std::size_t size) {
  const device_ptr end = addr + size;
  std::size_t removed = 0;
  auto it = by_addr_.upper_bound(addr);
  if (it != by_addr_.begin()) --it;
  while (it != by_addr_.end() && it->first < end) {
    const device_ptr start = it->first;
    const device_ptr stop = start + it->second;
    auto next = std::next(it);
    if (stop > addr) {
      remove(it);
      if (start < addr) add(start, addr - start);
      if (stop > end) add(end, stop - end);
      removed += std::min(stop, end) - std::max(start, addr);
    }
    it = next;
  }
  return removed;
}

bool range_set::overlaps(device_ptr addr, std::size_t size) const {
  auto it = by_addr_.lower_bound(addr + size);  // first range starting at or past the end
  if (it == by_addr_.begin()) return false;
  --it;
  return it->first + it->second > addr;
}

std::optional<device_ptr> range_set::find_best_fit(std::size_t size, std::size_t align) const {
  for (auto it = by_size_.lower_bound({size, 0}); it != by_size_.end(); ++it) {
    const device_ptr at = round_up(it->addr, align);
    if (at + size <= it->addr + it->size) return at;
  }
  return std::nullopt;
}

std::optional<device_ptr> range_set::take_best_fit(std::size_t size, std::size_t align) {
  for (auto it = by_size_.lower_bound({size, 0}); it != by_size_.end(); ++it) {
    const device_ptr start = it->addr;
    const std::size_t len = it->size;
    const device_ptr at = round_up(start, align);
    if (at + size > start + len) continue;  // the alignment pushed it out; try the next
    auto node = by_addr_.find(start);
    remove(node);
    if (at > start) add(start, at - start);
    if (at + size < start + len) add(at + size, start + len - (at + size));
    return at;
  }
  return std::nullopt;
}

std::optional<std::pair<device_ptr, std::size_t>> range_set::containing(device_ptr addr) const {
  auto it = by_addr_.upper_bound(addr);
  if (it == by_addr_.begin()) return std::nullopt;
  --it;
  if (addr >= it->first + it->second) return std::nullopt;
  return *it;
}

void range_set::validate() const {
  if (by_addr_.size() != by_size_.size())
    throw invariant_error(fmt::format("range_set: {} ranges by address, {} by size", by_addr_.size(), by_size_.size()));
  std::size_t sum = 0;
  device_ptr end = 0;
  bool first = true;
  for (const auto& [addr, size] : by_addr_) {
    if (size == 0) throw invariant_error(fmt::format("range_set: empty range at {:#x}", addr));
    if (!first && addr < end) throw invariant_error(fmt::format("range_set: range at {:#x} overlaps the one before", addr));
    if (!first && addr == end) throw invariant_error(fmt::format("range_set: range at {:#x} not merged with the one before", addr));
    if (!by_size_.count(size_key{size, addr})) throw invariant_error(fmt::format("range_set: range at {:#x} missing by size", addr));
    sum += size;
    end = addr + size;
    first = false;
  }
  for (auto it = by_size_.begin(); it != by_size_.end() && std::next(it) != by_size_.end(); ++it)
    if (!(*it < *std::next(it)))
      throw invariant_error(fmt::format("range_set: the size index is out of order at ({}, {:#x})", it->size, it->addr));
  if (sum != total_) throw invariant_error(fmt::format("range_set: total {} but ranges sum to {}", total_, sum));
}

}  // namespace vram::detail
