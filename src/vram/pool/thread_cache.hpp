#pragma once
// A thread's cache of blocks it freed, for the pool's hot path: a cached alloc + free touches only this
// cache and one slot of the block table, never the pool's lock. Blocks up to 256 KiB are kept in bins by
// rounded size (8 a bin, 4 MiB in all by default); larger ones in a short list matched by exact size. Each
// entry remembers the stream it was freed on, and is handed out again only on that stream (stream order).
// The owner holds `busy` while it touches the cache; the pool's flush (under the pool's lock, when memory is
// wanted) takes the same flag, so a flush never races an owner, and an owner never waits on the pool lock
// while holding it.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vram/core/types.hpp"

namespace vram::detail {

struct cache_entry {
  device_ptr ptr;
  std::size_t size;  // rounded
  stream_id stream;
};

class thread_cache {
 public:
  static constexpr std::size_t bins = (std::size_t{256} << 10) / 512;  // rounded sizes 512 B .. 256 KiB
  static constexpr std::size_t per_bin = 8;
  static constexpr std::size_t large_slots = 8;

  explicit thread_cache(std::size_t byte_limit) : byte_limit_(byte_limit) {}

  void lock() noexcept {
    while (busy_.exchange(true, std::memory_order_acquire)) {
    }
  }
  void unlock() noexcept { busy_.store(false, std::memory_order_release); }

  /// @brief A cached block of exactly @p size freed on @p stream, or 0. pre: locked.
  device_ptr pop(std::size_t size, stream_id stream) noexcept {
    if (size <= bins * 512) {
      auto& bin = small_[size / 512 - 1];
      if (bin.count == 0 || bin.items[bin.count - 1].stream != stream) return 0;
      const device_ptr p = bin.items[--bin.count].ptr;
      take(size);
      return p;
    }
    for (std::size_t i = 0; i < large_count_; ++i) {
      if (large_[i].size == size && large_[i].stream == stream) {
        const device_ptr p = large_[i].ptr;
        large_[i] = large_[--large_count_];
        take(size);
        return p;
      }
    }
    return 0;
  }

  /// @brief Keeps a freed block; false when the cache has no room for it. pre: locked.
  bool push(device_ptr p, std::size_t size, stream_id stream) noexcept {
    if (size <= bins * 512) {
      auto& bin = small_[size / 512 - 1];
      if (bin.count == per_bin || small_bytes_ + size > byte_limit_) return false;
      bin.items[bin.count++] = {p, stream};
      small_bytes_ += size;
    } else {
      if (large_count_ == large_slots) return false;
      large_[large_count_++] = {p, size, stream};
    }
    cached_bytes_.store(cached_bytes_.load(std::memory_order_relaxed) + size, std::memory_order_relaxed);
    return true;
  }

  /// @brief Empties the cache into @p out. pre: locked.
  void drain(std::vector<cache_entry>& out) {
    for (auto& bin : small_) {
      const std::size_t size = static_cast<std::size_t>(&bin - small_.data() + 1) * 512;
      for (std::uint32_t i = 0; i < bin.count; ++i) out.push_back({bin.items[i].ptr, size, bin.items[i].stream});
      bin.count = 0;
    }
    for (std::size_t i = 0; i < large_count_; ++i) out.push_back(large_[i]);
    large_count_ = 0;
    small_bytes_ = 0;
    cached_bytes_.store(0, std::memory_order_relaxed);
  }

  /// @brief Bytes held; readable from any thread.
  std::size_t cached_bytes() const noexcept { return cached_bytes_.load(std::memory_order_relaxed); }

  // Counters of the owner's hot-path calls, summed by the pool's statistics.
  std::atomic<std::uint64_t> allocations{0}, frees{0};
  std::atomic<std::int64_t> requested{0};

 private:
  void take(std::size_t size) noexcept {
    if (size <= bins * 512) small_bytes_ -= size;
    cached_bytes_.store(cached_bytes_.load(std::memory_order_relaxed) - size, std::memory_order_relaxed);
  }
  struct bin_entry {
    device_ptr ptr;
    stream_id stream;
  };
  struct bin {
    std::array<bin_entry, per_bin> items;
    std::uint32_t count = 0;
  };
  std::atomic<bool> busy_{false};
  std::size_t byte_limit_;
  std::array<bin, bins> small_{};
  std::array<cache_entry, large_slots> large_{};
  std::size_t large_count_ = 0;
  std::size_t small_bytes_ = 0;
  std::atomic<std::size_t> cached_bytes_{0};
};

}  // namespace vram::detail
