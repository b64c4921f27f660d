#pragma once
// A hash map from 64-bit addresses to small values, in one flat array: open addressing with linear probing
// and deletion by backward shift (no tombstones, so a long run of inserts and erases stays as fast as the
// first). The trace readers match millions of frees to their allocations by address with it; a node-based
// std::unordered_map allocates on every insert and was a tenth of reading a PyTorch snapshot.
//
// Addresses are multiples of 512 and cluster, so the hash multiplies by a 64-bit odd constant and keeps the
// top bits. The table doubles when more than half full. References returned stay valid until the next
// insert or erase.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace vram::detail {

template <class V>
class address_map {
 public:
  /// @brief The value under @p key, or nullptr.
  V* find(std::uint64_t key) noexcept {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = home(key);; i = next(i)) {
      slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == key) return &s.value;
    }
  }
  const V* find(std::uint64_t key) const noexcept { return const_cast<address_map*>(this)->find(key); }
  bool contains(std::uint64_t key) const noexcept { return find(key) != nullptr; }

  /// @brief Sets the value under @p key, adding the key if new; true when it was new.
  bool insert_or_assign(std::uint64_t key, V value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    for (std::size_t i = home(key);; i = next(i)) {
      slot& s = slots_[i];
      if (!s.used) {
        s = slot{key, std::move(value), true};
        ++size_;
        return true;
      }
      if (s.key == key) {
        s.value = std::move(value);
        return false;
      }
    }
  }

  /// @brief Removes @p key; false when it was not there.
  bool erase(std::uint64_t key) noexcept {
    if (slots_.empty()) return false;
    std::size_t i = home(key);
    for (;; i = next(i)) {
      if (!slots_[i].used) return false;
      if (slots_[i].key == key) break;
    }
    // Backward shift: move each later key of the run into the hole when its home does not lie in the
    // cyclic range (hole, its slot], so that every key stays reachable from its home without a gap.
    std::size_t hole = i;
    for (std::size_t j = next(i);; j = next(j)) {
      if (!slots_[j].used) break;
      const std::size_t h = home(slots_[j].key);
      const bool stays = hole < j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (stays) continue;
      slots_[hole] = std::move(slots_[j]);
      hole = j;
    }
    slots_[hole].used = false;
    --size_;
    return true;
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  /// @brief Calls fn(key, value) for every entry, in no particular order.
  template <class F>
  void for_each(F&& fn) const {
    for (const slot& s : slots_)
      if (s.used) fn(s.key, s.value);
  }

 private:
  struct slot {
    std::uint64_t key = 0;
    V value{};
    bool used = false;
  };

  std::size_t home(std::uint64_t key) const noexcept {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  std::size_t next(std::size_t i) const noexcept { return (i + 1) & (slots_.size() - 1); }

  void grow() {
    std::vector<slot> old = std::move(slots_);
    const std::size_t capacity = old.empty() ? 16 : old.size() * 2;
    slots_.assign(capacity, slot{});
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (slot& s : old)
      if (s.used) insert_or_assign(s.key, std::move(s.value));
  }

  std::vector<slot> slots_;
  std::size_t size_ = 0;
  int shift_ = 64;
};

}  // namespace vram::detail
