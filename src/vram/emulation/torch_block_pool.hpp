#pragma once
// Blocks and free-block pools of the PyTorch caching allocator emulation (torch_caching_resource).
//
// Words:
//   segment  memory taken from the device in one piece: one legacy_malloc (cudaMalloc), or one expandable
//            segment (a reserved virtual range whose pages are mapped on demand).
//   block    a run of bytes inside a segment. The blocks of a segment tile it and form a doubly linked list
//            in address order; a block is allocated, free (cached in its pool), waiting for stream events, or,
//            in an expandable segment, unmapped.
//   pool     the free blocks of one size class: small (rounded requests <= 1 MiB, 2 MiB segments) or large.
//
// A pool keeps its free blocks in an ordered set keyed like PyTorch's comparator (stream, size, address), so
// best fit is one lower_bound, and the unmapped ranges of expandable segments in a second set keyed (stream,
// address). Blocks come from an arena that recycles them and set nodes from a pool memory resource, so the
// steady state allocates no memory per call.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <set>
#include <vector>

#include "vram/core/types.hpp"

namespace vram::detail {

// PyTorch's size constants (c10/cuda/CUDACachingAllocator.cpp).
inline constexpr std::size_t torch_min_block = 512;               // every size rounds to a multiple of this
inline constexpr std::size_t torch_small_size = 1 * MiB;          // largest request of the small pool
inline constexpr std::size_t torch_small_buffer = 2 * MiB;        // segment size of the small pool
inline constexpr std::size_t torch_large_buffer = 20 * MiB;       // segment size for requests of 1-10 MiB
inline constexpr std::size_t torch_min_large_alloc = 10 * MiB;    // from here segments fit the request
inline constexpr std::size_t torch_round_large = 2 * MiB;         // ... rounded up to this

class torch_expandable_segment;
class torch_block_pool;

/// @brief A run of bytes inside a segment.
struct torch_block {
  device_ptr ptr = 0;
  std::size_t size = 0;
  std::size_t requested = 0;                  // what the program asked for (allocated blocks)
  stream_id stream = 0;                       // the stream it was allocated on; it stays on that stream
  torch_block* prev = nullptr;                // neighbours inside the segment
  torch_block* next = nullptr;
  torch_block_pool* pool = nullptr;           // the pool it returns to
  torch_expandable_segment* segment = nullptr;  // its expandable segment, or null for a legacy segment
  std::vector<stream_id> stream_uses;         // other streams recorded with record_stream
  int event_count = 0;                        // events still pending before it may return to the pool
  std::int64_t gc_count_base = 0;             // the pool's search count when it was cached
  bool allocated = false;
  bool mapped = true;                         // false only for unmapped ranges of expandable segments

  bool is_split() const noexcept { return prev != nullptr || next != nullptr; }
  /// @brief True when it sits in its pool: not allocated, no pending events, no recorded streams.
  bool cached() const noexcept { return !allocated && event_count == 0 && stream_uses.empty(); }
};

/// @brief A search key for the ordered sets (a block need not exist to look one up).
struct torch_block_key {
  stream_id stream = 0;
  std::size_t size = 0;
  device_ptr ptr = 0;
};

/// @brief PyTorch's BlockComparatorSize: stream, then size, then address.
struct torch_size_order {
  using is_transparent = void;
  static bool less(stream_id sa, std::size_t za, device_ptr pa, stream_id sb, std::size_t zb,
                   device_ptr pb) noexcept {
    if (sa != sb) return sa < sb;
    if (za != zb) return za < zb;
    return pa < pb;
  }
  bool operator()(const torch_block* a, const torch_block* b) const noexcept {
    return less(a->stream, a->size, a->ptr, b->stream, b->size, b->ptr);
  }
  bool operator()(const torch_block* a, const torch_block_key& b) const noexcept {
    return less(a->stream, a->size, a->ptr, b.stream, b.size, b.ptr);
  }
  bool operator()(const torch_block_key& a, const torch_block* b) const noexcept {
    return less(a.stream, a.size, a.ptr, b->stream, b->size, b->ptr);
  }
};

/// @brief PyTorch's BlockComparatorAddress: stream, then address.
struct torch_address_order {
  using is_transparent = void;
  bool operator()(const torch_block* a, const torch_block* b) const noexcept {
    return a->stream != b->stream ? a->stream < b->stream : a->ptr < b->ptr;
  }
  bool operator()(const torch_block* a, const torch_block_key& b) const noexcept {
    return a->stream != b.stream ? a->stream < b.stream : a->ptr < b.ptr;
  }
  bool operator()(const torch_block_key& a, const torch_block* b) const noexcept {
    return a.stream != b->stream ? a.stream < b->stream : a.ptr < b->ptr;
  }
};

/// @brief Makes and recycles blocks in chunks, so splitting and merging do not call the host allocator.
class torch_block_arena {
 public:
  torch_block_arena() = default;
  torch_block_arena(const torch_block_arena&) = delete;
  torch_block_arena& operator=(const torch_block_arena&) = delete;

  /// @brief A fresh block (not allocated, mapped, unlinked).
  torch_block* make(device_ptr ptr, std::size_t size, stream_id stream, torch_block_pool* pool);
  /// @brief Returns a block for reuse. pre: unlinked from every set and list.
  void recycle(torch_block* b) noexcept;
  /// @brief Blocks handed out and not recycled.
  std::size_t live() const noexcept { return live_; }

 private:
  static constexpr std::size_t chunk_blocks = 256;
  std::vector<std::unique_ptr<torch_block[]>> chunks_;
  std::vector<torch_block*> free_;
  std::size_t live_ = 0;
};

/// @brief The cached blocks of one size class, and the unmapped ranges of its expandable segments.
class torch_block_pool {
 public:
  using block_set = std::pmr::set<torch_block*, torch_size_order>;
  using range_set = std::pmr::set<torch_block*, torch_address_order>;

  torch_block_pool(bool small, std::pmr::memory_resource* nodes);

  bool small() const noexcept { return small_; }

  // Free, mapped blocks by (stream, size, address).
  const block_set& blocks() const noexcept { return blocks_; }
  /// @brief Caches @p b, stamping its garbage-collection age. pre: b is cached() and not in the set.
  void insert(torch_block* b);
  /// @brief Removes @p b. pre: b is in the set with its current stream, size and address.
  void erase(torch_block* b);
  block_set::const_iterator erase(block_set::const_iterator it);
  block_set::const_iterator lower_bound(const torch_block_key& key) const { return blocks_.lower_bound(key); }

  // Unmapped ranges of expandable segments by (stream, address).
  range_set& unmapped() noexcept { return unmapped_; }
  const range_set& unmapped() const noexcept { return unmapped_; }

  /// @brief Counts one search for a free block (PyTorch counts them only while garbage collection is on).
  void count_search() noexcept { ++searches_; }
  /// @brief Searches since @p b was cached: its age for garbage collection.
  std::int64_t age(const torch_block& b) const noexcept { return searches_ - b.gc_count_base; }

  /// @brief Bytes in the cached blocks.
  std::size_t free_bytes() const noexcept { return free_bytes_; }
  /// @brief The largest cached block over all streams (0 when none). O(streams * log n).
  std::size_t largest_free() const;

 private:
  block_set blocks_;
  range_set unmapped_;
  std::size_t free_bytes_ = 0;
  std::int64_t searches_ = 0;
  bool small_;
};

}  // namespace vram::detail
