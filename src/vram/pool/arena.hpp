#pragma once
// The arena: vram's physical layer. One large virtual range is reserved per device and cut into zones
// (small blocks in one, larger ones in another, so small blocks never pin the handles under large blocks).
// Physical memory is created in handles (cuMemCreate) and mapped only where blocks need it. Blocks are
// placed by best fit at 512-byte granularity into mapped free memory, coalesced across handles.
//
// Words (see also core/types.hpp):
//  - a *view* is one mapping of a handle, whole, at a granule-aligned address. A handle usually has one view;
//    it has more when growth placed a block's partial first or last granule in a free part of it (below).
//  - every byte of a handle is *owned* by exactly one of its views: at that view's address it is either in a
//    block or in the zone's free list. At its other views the same byte is *foreign*: mapped, but never
//    handed out there. So no byte is ever reachable through two free lists.
//  - a handle is *cold* when no live block touches any granule of any of its views. Cold handles stay
//    mapped (the next block may land there at no driver cost) until memory is wanted elsewhere.
//
// The arena is made of small parts, each with its own tests:
//  - handle_map: the books (handles, views, granules, cold and spare handles, free/unmapped/foreign ranges),
//    with the piece_index of free handle ends beside gaps; no driver call;
//  - growth_planner: pure functions from the books and a request to a plan;
//  - pressure: how near the arena is to its bounds; growth_pace: whether growth comes in a burst.
// The arena itself makes the driver calls (arena.cpp), chooses between the plans and carries the chosen one
// out (arena_growth.cpp).
//
// Growth, when no mapped free range fits (growth_planner.cpp): the block is placed where it needs the fewest
// bytes of memory mapped anew, over
//  - the top of the zone's mapped memory, extending the free range that ends there (as an expandable segment);
//  - once the arena is lean or tight (below): also the holes between mapped ranges of at least the block's
//    size less four granules, using the free memory on one or both sides of a hole (left- or right-aligned)
//    and mapping handles into the gap; once it is tight, also the gaps beside the four largest free ranges,
//    however small;
//  - once it is tight: also *aliases*. Free memory at the end of a handle (beside unmapped address space)
//    can hold the first bytes of a block anywhere (in any zone), and free memory at a handle's start its last
//    bytes: the handle is mapped a second time so that the piece falls where the block needs it. Blocks then share
//    granules whatever their addresses, so memory that is free only in parts of granules still serves
//    requests.
// The arena is *tight* when the device (or the limit) has no room left for tight_budgets times the cache
// budget beside a request, and *full* when it has none for the budget itself; it is *lean* when reserved
// memory, grown by the request, would leave less than the cache budget under reserve_ratio x the peak of the
// bytes in use. The budget these stages are judged with is at most stage_room_share of the room the device
// (or the limit) leaves above the peak in use, so that they scale with that room. A tight arena that is not
// yet full still takes mapped memory that holds a block, as a roomy
// one does, even where the block pins a cold handle: growth would create memory there, not recycle it. A
// full one grows rather than pin cold memory only for a request that takes what is in use to at least
// cold_guard_share of its peak; below that, the request is one of a pattern that has been held before, and
// moving memory around it cost calls on every request (a serving loop at a limit) for bytes that were free
// again before the next peak.
// Tight and lean both turn growth to holes and size new handles from the room left (under the device, or
// under that bound); only a tight arena also maps aliases, places blocks by the least cold memory they pin
// and stitches cold handles generously (each of which, on a roomy device, costs more driver time or later
// fits than it saves). Before a tight arena grows, alias views that hold no
// live block any more give their bytes back to a view of the same handle that does, and are unmapped, so
// the piece they took returns to the handle's end instead of lying between foreign bytes.
// Handle sizes follow the pace of growth: the growths of the last burst window (the device's time, which a
// replay sets to the trace's) summing to burst_bytes or more are a *burst*, whose handles may be up to
// max_handle_bytes; other growth makes handles of at most small_handle_bytes; a block of block_handles x
// max_handle_bytes or more may be made of handles of 1/block_handles of it. A handle is mapped whole, so
// one that outlives the block it was made for holds all its bytes for whatever block sits on it: small
// handles let freed memory move, large ones save the calls of a working set mapped in milliseconds.
// Ties go to the plan with fewer alias mappings, then to the one that leaves the least free memory behind.
// The bytes to map anew come from spare handles, then (past the cache budget) from cold handles unmapped
// and mapped again where the block goes ("stitching"), then from new handles. When the device (or the
// limit) refuses, every cold handle is unmapped, the spares released, and the growth planned again; if that
// fails too, a tight arena tries once more with the free ends of every handle as pieces, not only those
// beside gaps (the index keeps only those: the others cost more calls than they save while memory is left).
// Reserved = bytes of all handles held (mapped or spare). Driver calls go through the device seam only.
// Not thread-safe: the pool calls it under its lock.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "vram/core/types.hpp"
#include "vram/pool/growth_pace.hpp"
#include "vram/pool/growth_planner.hpp"
#include "vram/pool/handle_map.hpp"
#include "vram/pool/pressure.hpp"
#include "vram/resource/memory_resource.hpp"

namespace vram {
class device;
}

namespace vram::detail {

struct arena_options {
  /// Cached (mapped but unused) memory allowed before growth recycles cold handles instead of creating new
  /// ones, as a fraction of the bytes in use. 0 recycles always (least memory, most driver calls).
  double max_cached_ratio = 0.05;
  /// The arena turns tight (places blocks by the least memory pinned, maps aliases, stitches generously)
  /// once the device (or the limit) has room for fewer than this many cache budgets beside a request, so
  /// that the layout it meets the device's end with is already packed. At least 1.
  double tight_budgets = 3.0;
  /// The cache budget the arena's stages (roomy to full) and its alias rule are judged with is at most this
  /// share of the room the device (or the limit) leaves above the peak in use, as a ratio of that peak: under
  /// a limit a few percent above the working set, a budget of max_cached_ratio would call the arena tight on
  /// most requests, and its placement by least pinning would never let the layout settle. 0: no bound.
  double stage_room_share = 0.4;
  /// A full arena grows rather than place a block where it pins a cold handle only when what is in use, the
  /// block included, reaches this share of the peak in use so far; below it the block takes mapped memory.
  double cold_guard_share = 0.7;
  /// Largest handle created at once (but for a block of block_handles x this or more); a block larger than
  /// this is backed by several. Handles are also kept to 1/1024 of the device (or the limit; not a large
  /// block's) and 1/16 of what is left of it (arena.cpp, handle_cap).
  std::size_t max_handle_bytes = std::size_t{64} << 20;
  /// Address space to reserve for each zone, in multiples of the device's total memory.
  std::size_t address_space_factor = 8;
  /// Most bytes the arena may hold from the device; 0 for no limit.
  std::size_t limit = 0;
  /// Number of zones (each its own address range and free lists; physical memory is shared).
  std::size_t zones = 1;
  /// Whether growth may map a handle a second time to use free memory at its ends (aliases).
  bool aliasing = true;
  /// Reserved memory the arena keeps under, as a multiple of the peak bytes in use: nearing it, the arena is
  /// lean (growth into holes, smaller handles). 0: never lean, only tight.
  double reserve_ratio = 0;
  /// Largest handle created outside a burst of growth (0: max_handle_bytes always).
  std::size_t small_handle_bytes = 0;
  /// A block of block_handles x max_handle_bytes or more may be made of handles of up to 1/block_handles of
  /// its size (still at most 1/16 of what is left); 0, or max_handle_bytes 0: handles never exceed
  /// max_handle_bytes.
  std::size_t block_handles = 0;
  /// Growth of at least this many bytes within burst_window_ns (the request included) is a burst: its
  /// handles may be up to max_handle_bytes.
  std::size_t burst_bytes = std::size_t{256} << 20;
  std::int64_t burst_window_ns = 10'000'000;
  /// Past the cache budget, the most bytes of a spare handle a growth may map beyond what it wants: a larger
  /// spare goes back to the device, and the growth makes handles of what it wants. (SIZE_MAX: never.)
  std::size_t spare_slack_bytes = SIZE_MAX;
  /// Whether a growth for a request that keeps the bytes in use at or below their peak so far may fill holes
  /// between mapped ranges, as a lean arena's does.
  bool holes_below_peak = false;
};

/// @brief Counters of the arena's work, for statistics and tests.
struct arena_counters {
  std::uint64_t handles_created = 0;
  std::uint64_t handles_released = 0;
  std::uint64_t handles_mapped = 0;    // views mapped, aliases included
  std::uint64_t handles_unmapped = 0;  // views unmapped
  std::uint64_t aliases_mapped = 0;    // of the views mapped, those of a handle already mapped elsewhere
  std::uint64_t growths = 0;
  std::uint64_t hole_growths = 0;              // growths placed in a hole rather than at the top
  std::uint64_t lean_growths = 0;              // growths while lean and not tight
  std::uint64_t burst_growths = 0;             // growths in a burst (large handles)
  std::uint64_t views_dissolved = 0;           // alias views given up when they held no live block
  std::uint64_t aliased_growths = 0;           // growths that used a free end of a handle mapped elsewhere
  std::uint64_t out_of_memory_recoveries = 0;  // growths that had to recycle or release after a refusal
  std::uint64_t last_resort_growths = 0;       // of those, growths that took free ends not beside a gap
  std::uint64_t address_space_exhausted = 0;   // growths that found no address range (failed)
  std::uint64_t unmaps_deferred = 0;           // views whose unmap waited for a fence, not for the device
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

  std::size_t reserved() const noexcept { return map_.reserved(); }
  std::size_t in_use() const noexcept { return in_use_; }
  /// @brief The most the arena may hold: the device's memory, or the limit when lower.
  std::size_t capacity() const noexcept;
  /// @brief Whether the index of free handle ends is kept now (from the first tight request on, until 1024
  /// judgements of the pressure in a row found the arena short of tight; arena_growth.cpp).
  bool pieces_indexed() const noexcept { return map_.pieces_kept(); }
  /// @brief Bytes of handles that are mapped (each counted once, however many views it has).
  std::size_t mapped() const noexcept { return map_.mapped(); }
  /// @brief Mapped memory no block uses: its total and the largest range, over all zones.
  free_space free_memory() const noexcept { return map_.free_memory(); }
  std::size_t granularity() const noexcept { return map_.granularity(); }
  device_ptr base() const noexcept { return map_.base(); }
  std::size_t span() const noexcept { return map_.span(); }
  device_ptr zone_base(std::size_t z) const noexcept { return map_.zone_base(z); }
  std::size_t zone_span() const noexcept { return map_.zone_span(); }
  const arena_counters& counters() const noexcept { return counters_; }
  std::size_t limit() const noexcept { return options_.limit; }
  void set_limit(std::size_t bytes) noexcept { options_.limit = bytes; }

  /// @brief Each handle: the addresses of its views (none when spare), bytes, granules touched by live blocks.
  struct handle_view {
    std::vector<device_ptr> views;
    std::size_t bytes;
    std::uint32_t busy_granules;
  };
  std::vector<handle_view> handles() const;
  /// @brief Every mapped free range (warm or cold), by address.
  std::vector<std::pair<device_ptr, std::size_t>> free_ranges() const;

  /// @brief How the arena unmaps without waiting for the device. cuMemUnmap does not wait for queued work, and
  /// memory freed into the arena may still be used by work queued on the stream it was freed on (one
  /// stream's frees carry no event). fence() returns 0 when everything freed into the arena so far is safe
  /// to unmap, else the id of a fence that covers it (recorded then, if need be); done(id, wait) tells
  /// whether that fence has completed, waiting for it when @\p wait. A view whose fence has not completed
  /// stays mapped at its address, which stays out of the gaps, until settle_unmaps() finds the fence done;
  /// the arena's books have it unmapped, and its handle may be mapped elsewhere meanwhile (a handle may be
  /// mapped twice). Without a fence, views are unmapped at once.
  struct unmap_fence {
    std::function<std::uint64_t()> fence;
    std::function<bool(std::uint64_t, bool)> done;
  };
  void set_unmap_fence(unmap_fence f) { fence_ = std::move(f); }
  /// @brief Unmaps the deferred views whose fences completed; with @p wait, every one, waiting for its fence.
  void settle_unmaps(bool wait);
  /// @brief Bytes of address space unmapped in the arena's books but still mapped on the device.
  std::size_t deferred_unmap_bytes() const noexcept;

  /// @brief Checks the granule table, the handles, their views and every free list against each other.
  void validate() const;

 private:
  arena(device& dev, arena_options options, std::size_t device_total);

  // Placement and growth (arena_growth.cpp); the plans come from growth_planner.hpp.
  void update_pressure(std::size_t size);
  growth_settings settings(std::size_t request) const noexcept;
  void take(const growth_plan& p, std::size_t size);
  void note_growth(const growth_plan& p, device_ptr block, std::size_t size);
  device_ptr carry_out(const growth_plan& p, std::size_t size, std::size_t zi, bool recovering, bool gen,
                       bool& refused);
  bool acquire(const growth_plan& p, std::size_t size, bool recovering, bool gen, std::vector<std::uint32_t>& use,
               std::size_t& have);
  void reclaim(std::size_t want, std::size_t room, const growth_plan& p, std::size_t size, bool gen);
  bool protects(const growth_plan& p, std::size_t size, std::uint32_t handle) const;
  void recycle_every_cold_handle();
  void release_every_spare();

  // The device's side of the books (arena.cpp).
  std::uint32_t create_handle(std::size_t bytes);  // handle_map::none when the device (or the limit) refuses
  void map_view(std::uint32_t handle, device_ptr va);
  // A view gone from the books: unmapped now, or once its fence has completed.
  void unmapped(handle_map::mapping m);
  void unmap_handle(std::uint32_t idx);
  void release_spare(std::uint32_t idx);  // pre: a spare, taken from the spares
  std::size_t handle_cap(std::size_t request) const noexcept;  // for a growth that places @p request bytes
  // What growth plans against: the capacity, or when lean the reserve bound, for a request of s bytes.
  std::size_t lean_bound(std::size_t s) const noexcept;

  device* device_;
  arena_options options_;
  growth_pace pace_;
  std::size_t device_total_;
  handle_map map_;
  std::size_t in_use_ = 0;
  std::size_t peak_in_use_ = 0;
  arena_counters counters_;
  unmap_fence fence_;
  struct deferred_unmap {
    device_ptr va;
    std::size_t bytes;
    std::uint64_t fence;
  };
  std::vector<deferred_unmap> deferred_;  // views unmapped in the books, their fences pending
  pressure pressure_ = pressure::roomy;  // judged at each request (pressure.hpp)
  bool lean() const noexcept { return pressure_ >= pressure::lean; }
  bool tight() const noexcept { return pressure_ >= pressure::tight; }
  bool full() const noexcept { return pressure_ == pressure::full; }
  // The ratio of the cache budget the stages are judged with: max_cached_ratio, at most stage_room_share of
  // (capacity / peak in use - 1).
  double stage_ratio() const noexcept;
  // Whether a request of s bytes is guarded from pinning cold memory: the arena is tight and what is in use
  // with it reaches cold_guard_share of the peak in use.
  bool guards_cold(std::size_t s) const noexcept;
  // Whether @p more bytes reserved beside what is held would pass the cache budget for a request of @p s bytes:
  // (1 + max_cached_ratio) x (in use + s).
  bool past_budget(std::size_t s, std::size_t more) const noexcept;
  std::size_t roomy_judgements_ = 0;  // requests in a row that found the arena not tight
};

}  // namespace vram::detail
