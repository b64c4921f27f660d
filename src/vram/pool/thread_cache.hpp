#pragma once
// A thread's cache of blocks it freed, for the pool's hot path: a cached alloc + free touches only this
// cache and one slot of the block table, never the pool's lock, and makes no atomic read-modify-write.
// Blocks up to 256 KiB are kept in bins by rounded size (8 a bin, at most 4 MiB of such blocks by default);
// larger ones, with no byte limit, in eight slots matched by exact size. Each entry remembers the stream it
// was freed on, and is handed out again only on that stream (stream order). The large slots serve only the
// same size again: a large request that misses them has the pool take every thread's large blocks back
// (drain_large) before it places the request, so that no free large block is hidden from best fit.
// Only the owner thread touches the cache, between enter() and leave(). When the pool's lock holder needs
// every thread to stand still (to flush caches, or to grow the block table) it raises the pool's `stop` flag,
// issues a heavy fence and waits until no cache is entered (wait_idle()); an owner that finds `stop` raised
// as it enters goes the pool's slow path instead (asymmetric_fence.hpp has the protocol).

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vram/core/types.hpp"
#include "vram/pool/asymmetric_fence.hpp"
#include "vram/pool/block_table.hpp"

namespace vram::detail {

struct cache_entry {
  device_ptr ptr;
  std::size_t size;  // rounded
  stream_id stream;
  block_table::slot* slot;  // the block's state, so taking it back needs no search of the table
};

class alignas(64) thread_cache {  // aligned: two threads' caches never share a cache line
 public:
  static constexpr std::size_t bins = (std::size_t{256} << 10) / 512;  // rounded sizes 512 B .. 256 KiB
  static constexpr std::size_t per_bin = 8;
  static constexpr std::size_t large_slots = 8;

  explicit thread_cache(std::size_t byte_limit) : byte_limit_(byte_limit) {}

  /// @brief Marks the cache as in use by its owner; false (and not entered) when @p stop is raised.
  /// @p asymmetric: asymmetric_fences(), for which fence protocol the pool uses.
  bool enter(const std::atomic<bool>& stop, bool asymmetric) noexcept {
    if (asymmetric) {
      busy_.store(true, std::memory_order_relaxed);
      light_fence();
    } else {
      busy_.exchange(true, std::memory_order_seq_cst);
    }
    // Acquire: what a stopper wrote into this cache before lowering `stop` is seen here.
    if (stop.load(asymmetric ? std::memory_order_acquire : std::memory_order_seq_cst)) {
      busy_.store(false, std::memory_order_release);
      return false;
    }
    return true;
  }
  void leave() noexcept { busy_.store(false, std::memory_order_release); }
  /// @brief Waits until the owner has left the cache. pre: the caller raised `stop` (seq_cst), then called
  /// heavy_fence() when the protocol is asymmetric.
  void wait_idle() const noexcept {
    while (busy_.load(std::memory_order_seq_cst)) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }

  /// @brief A cached block of exactly @p size freed on @p stream, or 0. pre: entered, or the owner outside
  /// the hot path, or the stopped threads' waiter.
  /// @p slot: the block's slot in the table, as push() was given it.
  device_ptr pop(std::size_t size, stream_id stream, block_table::slot*& slot) noexcept {
    if (size <= bins * 512) {
      auto& bin = small_[size / 512 - 1];
      if (bin.count == 0 || bin.items[bin.count - 1].stream != stream) return 0;
      const bin_entry& e = bin.items[--bin.count];
      slot = e.slot;
      take(size);
      return e.ptr;
    }
    for (std::size_t i = 0; i < large_count_; ++i) {
      if (large_[i].size == size && large_[i].stream == stream) {
        const device_ptr p = large_[i].ptr;
        slot = large_[i].slot;
        if (i != --large_count_) large_[i] = large_[large_count_];
        take(size);
        return p;
      }
    }
    return 0;
  }

  /// @brief Keeps a freed block; false when the cache has no room for it. pre: as pop().
  bool push(device_ptr p, std::size_t size, stream_id stream, block_table::slot* slot) noexcept {
    if (size <= bins * 512) {
      auto& bin = small_[size / 512 - 1];
      if (bin.count == per_bin || small_bytes_ + size > byte_limit_) return false;
      bin.items[bin.count++] = {p, stream, slot};
      small_bytes_ += size;
    } else {
      if (large_count_ == large_slots) return false;
      large_[large_count_++] = {p, size, stream, slot};
      large_bytes_.store(large_bytes_.load(std::memory_order_relaxed) + size, std::memory_order_relaxed);
    }
    cached_bytes_.store(cached_bytes_.load(std::memory_order_relaxed) + size, std::memory_order_relaxed);
    return true;
  }

  /// @brief Empties the cache into @p out. pre: the owner outside the hot path, or the stopped threads' waiter.
  void drain(std::vector<cache_entry>& out) {
    for (auto& bin : small_) {
      const std::size_t size = static_cast<std::size_t>(&bin - small_.data() + 1) * 512;
      for (std::uint32_t i = 0; i < bin.count; ++i) out.push_back({bin.items[i].ptr, size, bin.items[i].stream, bin.items[i].slot});
      bin.count = 0;
    }
    small_bytes_ = 0;
    drain_large(out);
    cached_bytes_.store(0, std::memory_order_relaxed);
  }

  /// @brief Empties the slots of large blocks into @p out and leaves the bins. pre: as drain().
  void drain_large(std::vector<cache_entry>& out) {
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < large_count_; ++i) {
      out.push_back(large_[i]);
      bytes += large_[i].size;
    }
    large_count_ = 0;
    large_bytes_.store(0, std::memory_order_relaxed);
    cached_bytes_.store(cached_bytes_.load(std::memory_order_relaxed) - bytes, std::memory_order_relaxed);
  }

  /// @brief Points every entry at its block's slot in a new table: @p find(ptr) gives it. pre: as drain().
  template <class F>
  void rebind(F&& find) {
    for (auto& bin : small_)
      for (std::uint32_t i = 0; i < bin.count; ++i) bin.items[i].slot = find(bin.items[i].ptr);
    for (std::size_t i = 0; i < large_count_; ++i) large_[i].slot = find(large_[i].ptr);
  }

  /// @brief Bytes held; readable from any thread.
  std::size_t cached_bytes() const noexcept { return cached_bytes_.load(std::memory_order_relaxed); }
  /// @brief Bytes held in the large slots; readable from any thread.
  std::size_t large_bytes() const noexcept { return large_bytes_.load(std::memory_order_relaxed); }

  // Counters of the owner's hot-path calls, summed by the pool's statistics.
  std::atomic<std::uint64_t> allocations{0}, frees{0};
  std::atomic<std::int64_t> requested{0};

 private:
  void take(std::size_t size) noexcept {
    if (size <= bins * 512) {
      small_bytes_ -= size;
    } else {
      large_bytes_.store(large_bytes_.load(std::memory_order_relaxed) - size, std::memory_order_relaxed);
    }
    cached_bytes_.store(cached_bytes_.load(std::memory_order_relaxed) - size, std::memory_order_relaxed);
  }
  struct bin_entry {
    device_ptr ptr;
    stream_id stream;
    block_table::slot* slot;
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
  std::atomic<std::size_t> large_bytes_{0};
};

}  // namespace vram::detail
