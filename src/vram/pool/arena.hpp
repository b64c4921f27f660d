#pragma once
// The arena: vram's physical layer. One large virtual range is reserved per device and cut into zones
// (small blocks in one, larger ones in another, so small blocks never pin the handles under large blocks).
// Physical memory is created in handles (cuMemCreate) and mapped only where blocks need it. Blocks are
// placed by best fit at 512-byte granularity into mapped free memory, coalesced across handles. When none
// fits, the arena maps more,
// extending the free range at the top of the zone's mapped memory (as an expandable segment does):
//  - a handle is "cold" when no live block touches any of its granules; cold handles stay mapped (the next
//    block may land there at no driver cost) until memory is wanted elsewhere;
//  - growth creates new handles while reserved memory stays within (1 + max_cached_ratio) x the bytes in
//    use; past that it first unmaps cold handles, of any zone, and maps them again where the new block goes
//    ("stitching"), so free memory anywhere serves a request anywhere;
//  - when the device (or the limit) refuses, it recycles every cold handle, releases those it cannot use,
//    and retries before failing.
// Reserved = bytes of all handles held (mapped or spare). Driver calls go through the device seam only.
// Not thread-safe: the pool calls it under its lock.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "vram/core/types.hpp"
#include "vram/pool/range_set.hpp"
#include "vram/resource/memory_resource.hpp"

namespace vram {
class device;
}

namespace vram::detail {

struct arena_options {
  /// Cached (mapped but unused) memory allowed before growth recycles cold handles instead of creating new
  /// ones, as a fraction of the bytes in use. 0 recycles always (least memory, most driver calls).
  double max_cached_ratio = 0.05;
  /// Largest handle created at once; a block larger than this is backed by several. Handles are also kept
  /// to 1/1024 of the device and 1/16 of what it has left (arena.cpp, handle_cap).
  std::size_t max_handle_bytes = std::size_t{64} << 20;
  /// Address space to reserve for each zone, in multiples of the device's total memory.
  std::size_t address_space_factor = 8;
  /// Most bytes the arena may hold from the device; 0 for no limit.
  std::size_t limit = 0;
  /// Number of zones (each its own address range and free lists; physical memory is shared).
  std::size_t zones = 1;
};

/// @brief Counters of the arena's work, for statistics and tests.
struct arena_counters {
  std::uint64_t handles_created = 0;
  std::uint64_t handles_released = 0;
  std::uint64_t handles_mapped = 0;
  std::uint64_t handles_unmapped = 0;
  std::uint64_t growths = 0;
  std::uint64_t out_of_memory_recoveries = 0;  // growths that had to recycle or release after a refusal
  std::uint64_t address_space_exhausted = 0;   // growths that found no address range (failed)
};

class arena {
 public:
  arena(device& dev, arena_options options);
  ~arena();
  arena(const arena&) = delete;
  arena& operator=(const arena&) = delete;

  /// @brief A block of @p size bytes (a multiple of 512) in zone @p zone at an address aligned to @p align
  /// (<= granularity), or 0 when the device cannot back it even after recycling.
  device_ptr allocate(std::size_t size, std::size_t align, std::size_t zone = 0);
  /// @brief As allocate, but only from memory already mapped (no driver call); 0 when nothing fits.
  device_ptr allocate_mapped(std::size_t size, std::size_t align, std::size_t zone = 0);
  /// @brief pre: [p, p + size) is a block this arena handed out.
  void deallocate(device_ptr p, std::size_t size);
  /// @brief Unmaps and releases every handle no live block touches. Returns the bytes given back.
  std::size_t trim();

  std::size_t reserved() const noexcept { return reserved_; }
  std::size_t in_use() const noexcept { return in_use_; }
  std::size_t mapped() const noexcept { return mapped_; }
  /// @brief Mapped memory no block uses: its total and the largest range, over all zones.
  free_space free_memory() const noexcept;
  std::size_t granularity() const noexcept { return granularity_; }
  device_ptr base() const noexcept { return base_; }
  std::size_t span() const noexcept { return zone_span_ * zones_.size(); }
  device_ptr zone_base(std::size_t z) const noexcept { return base_ + z * zone_span_; }
  std::size_t zone_span() const noexcept { return zone_span_; }
  const arena_counters& counters() const noexcept { return counters_; }
  std::size_t limit() const noexcept { return options_.limit; }
  void set_limit(std::size_t bytes) noexcept { options_.limit = bytes; }

  /// @brief Each handle: address (0 when spare), bytes, granules touched by live blocks.
  struct handle_view {
    device_ptr va;
    std::size_t bytes;
    std::uint32_t busy_granules;
  };
  std::vector<handle_view> handles() const;
  /// @brief Every mapped free range (warm or cold), by address.
  std::vector<std::pair<device_ptr, std::size_t>> free_ranges() const;

  /// @brief Called before the arena unmaps a handle: the caller makes sure no queued work still uses memory
  /// it freed (the virtual memory calls do not wait for the device).
  void set_before_unmap(std::function<void()> fn) { before_unmap_ = std::move(fn); }

  /// @brief Checks the granule table, the handles and every free list against each other.
  void validate() const;

 private:
  static constexpr std::uint32_t no_handle = UINT32_MAX;
  struct granule {
    std::uint32_t live = 0;  // live blocks touching this granule
    std::uint32_t handle = no_handle;
  };
  struct handle_rec {
    phys_handle h = 0;
    device_ptr va = 0;  // 0 when not mapped
    std::size_t bytes = 0;
    std::uint32_t busy = 0;  // granules with live > 0
    bool in_use = false;     // slot holds a handle
  };
  struct zone {
    range_set free;      // mapped memory no block uses, coalesced across handles
    range_set unmapped;  // address space with nothing mapped
  };

  std::size_t granule_of(device_ptr p) const noexcept { return (p - base_) / granularity_; }
  zone& zone_of(device_ptr p) noexcept { return zones_[(p - base_) / zone_span_]; }
  void touch(device_ptr p, std::size_t size);
  void untouch(device_ptr p, std::size_t size);
  device_ptr grow(std::size_t size, std::size_t align, std::size_t z);
  void unmap_handle(std::uint32_t idx);
  void release_spare(std::uint32_t idx);
  std::uint32_t new_slot();
  std::uint32_t create_handle(std::size_t bytes);  // no_handle when the device (or the limit) refuses
  std::size_t handle_cap() const noexcept;

  device* device_;
  arena_options options_;
  std::size_t granularity_;
  std::size_t device_total_ = 0;
  device_ptr base_ = 0;
  std::size_t zone_span_ = 0;
  std::vector<zone> zones_;
  std::vector<granule> granules_;
  std::vector<handle_rec> handles_;
  std::vector<std::uint32_t> free_slots_;
  std::set<std::pair<std::size_t, std::uint32_t>> reclaimable_;  // mapped, busy == 0; by (bytes, slot)
  std::multimap<std::size_t, std::uint32_t> spare_;              // created, not mapped; by bytes
  std::size_t reserved_ = 0;
  std::size_t mapped_ = 0;
  std::size_t in_use_ = 0;
  arena_counters counters_;
  std::function<void()> before_unmap_;
};

}  // namespace vram::detail
