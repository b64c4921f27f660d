#pragma once
// The arena's books (arena.hpp): its address space cut into zones, the physical handles it holds and the
// views that map them, which granules live blocks touch, which handles are cold or spare, each zone's free,
// unmapped and foreign ranges, and the index of pieces derived from them. The books make no driver call:
// the arena makes the calls and writes down what it did, so the books, and the growth planner that reads
// them (growth_planner.hpp), can be set up and checked by hand without a device.
//
// Words (arena.hpp says more):
//  - a *view* is one mapping of a handle, whole, at a granule-aligned address;
//  - every byte of a handle is *owned* by one of its views (in a block or in that zone's free list there) and
//    *foreign* at its other views;
//  - a handle is *busy* while a live block touches a granule of one of its views, *cold* while mapped and not
//    busy, and *spare* while held but not mapped;
//  - a *piece* is free memory at the end of a view beside an unmapped gap: a suffix ends where a gap starts,
//    a prefix starts where one ends (piece_index.hpp).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "vram/core/range_set.hpp"
#include "vram/core/types.hpp"
#include "vram/pool/piece_index.hpp"
#include "vram/resource/memory_resource.hpp"

namespace vram::detail {

class handle_map {
 public:
  static constexpr std::uint32_t none = UINT32_MAX;
  struct granule {
    std::uint32_t live = 0;     // live blocks touching this granule
    std::uint32_t view = none;  // the view mapped here
  };
  struct handle_rec {
    phys_handle h = 0;
    std::size_t bytes = 0;
    std::uint32_t busy = 0;  // granules of its views with live > 0
    bool in_use = false;     // slot holds a handle
    bool listed = false;     // in the cold set (kept there while busy, until the set is next walked)
    std::vector<std::uint32_t> views;  // empty when spare
    std::uint64_t spare_order = 0;     // its place among spares of its size, while a spare
  };
  struct view_rec {
    std::uint32_t handle = none;
    device_ptr va = 0;
    bool idle_listed = false;  // in the idle views
  };
  struct zone {
    range_set free;      // owned mapped memory no block uses, coalesced across views
    range_set unmapped;  // address space with nothing mapped
    range_set foreign;   // mapped address space whose bytes another view of the same handle owns
  };
  /// The address range a view had, for the caller to unmap.
  struct mapping {
    device_ptr va;
    std::size_t bytes;
  };
  using unmapped_fn = std::function<void(mapping)>;

  /// @brief Books for @p zones zones of @p zone_span bytes from @p base, all unmapped.
  handle_map(device_ptr base, std::size_t zone_span, std::size_t zones, std::size_t granularity);

  // The address space.
  std::size_t granularity() const noexcept { return granularity_; }
  device_ptr base() const noexcept { return base_; }
  std::size_t zone_span() const noexcept { return zone_span_; }
  std::size_t zone_count() const noexcept { return zones_.size(); }
  std::size_t span() const noexcept { return zone_span_ * zones_.size(); }
  device_ptr zone_base(std::size_t z) const noexcept { return base_ + z * zone_span_; }
  device_ptr zone_end(std::size_t z) const noexcept { return zone_base(z) + zone_span_; }
  std::size_t zone_index(device_ptr p) const noexcept { return (p - base_) / zone_span_; }
  const zone& zone_at(std::size_t z) const noexcept { return zones_[z]; }
  const zone& zone_of(device_ptr p) const noexcept { return zones_[zone_index(p)]; }
  const granule& granule_at(device_ptr p) const noexcept { return granules_[granule_of(p)]; }

  // Handles and views.
  const handle_rec& handle(std::uint32_t idx) const noexcept { return handles_[idx]; }
  const std::vector<handle_rec>& handle_slots() const noexcept { return handles_; }
  const view_rec& view(std::uint32_t v) const noexcept { return views_[v]; }
  /// pre: @p p is mapped.
  const view_rec& view_at(device_ptr p) const noexcept { return views_[granule_at(p).view]; }
  std::size_t handle_bytes_at(device_ptr p) const noexcept { return handles_[view_at(p).handle].bytes; }
  /// @brief Mapped handles that were cold when last looked at, by (bytes, slot): every cold handle, and busy
  /// ones not yet dropped (drop_stale_cold).
  const std::set<std::pair<std::size_t, std::uint32_t>>& cold() const noexcept { return cold_; }
  /// @brief Spare handles by (bytes, order made spare), so that one leaves in O(log n) however many share its size.
  using spare_key = std::pair<std::size_t, std::uint64_t>;
  static constexpr std::uint64_t spare_last = ~std::uint64_t{0};  // upper_bound({bytes, spare_last}): past bytes
  const std::map<spare_key, std::uint32_t>& spares() const noexcept { return spare_; }
  /// @brief Views that may hold no live block (dissolve_idle_views).
  const std::vector<std::uint32_t>& idle_views() const noexcept { return idle_views_; }

  // Totals.
  std::size_t reserved() const noexcept { return reserved_; }  // bytes of every handle held
  std::size_t mapped() const noexcept { return mapped_; }      // of mapped handles, each counted once
  std::size_t spare_bytes() const noexcept { return spare_bytes_; }
  std::size_t cold_bytes() const noexcept { return cold_bytes_; }
  free_space free_memory() const noexcept;

  /// @brief Bytes of handles that a block at [p, p + size) would make busy: the cold handles under its mapped
  /// parts, each counted once.
  std::size_t pinned_by(device_ptr p, std::size_t size) const;
  /// @brief Whether a live block touches a granule of view @p v.
  bool holds_live(std::uint32_t v) const noexcept;

  // Changes. Handles: a new one is neither mapped nor spare until the caller maps or spares it.
  std::uint32_t add_handle(phys_handle h, std::size_t bytes);
  /// @brief pre: the handle is neither mapped nor spare. Forgets it and returns what the device is to release.
  phys_handle remove_handle(std::uint32_t idx);
  void add_spare(std::uint32_t idx);
  /// @brief pre: @p idx is a spare. It leaves the spares.
  void take_spare(std::uint32_t idx);
  /// @brief The whole handle mapped at @p va as a new view; returns it. The caller says which of its bytes
  /// the view owns (free_insert, or a block there) and marks the rest foreign. A handle's first view lists
  /// it cold; a further one (an alias) lists the handle's other views idle.
  std::uint32_t add_view(std::uint32_t idx, device_ptr va);
  /// @brief One view gone from the books: its owned bytes leave the free list, its foreign bytes the foreign
  /// list, its granules are unmapped and it leaves the handle's views. Its address range is no gap until
  /// address_unmapped() says the device has unmapped it.
  mapping remove_view(std::uint32_t v);
  void address_unmapped(mapping m);
  /// @brief pre: the handle is cold. Every view is removed (@p unmapped is told each) and the handle
  /// becomes a spare.
  void unmap_handle(std::uint32_t idx, const unmapped_fn& unmapped);
  /// @brief Drops the busy handles from the cold set.
  void drop_stale_cold();
  /// @brief Before a tight growth: each idle view that still holds no live block while another view of its
  /// handle does gives its bytes to that view and is removed (@p unmapped is told). Returns how many went.
  std::size_t dissolve_idle_views(const unmapped_fn& unmapped);

  // Blocks and free memory.
  void touch(device_ptr p, std::size_t size);    // a block placed at [p, p + size)
  void untouch(device_ptr p, std::size_t size);  // a block gone from there
  void free_insert(device_ptr p, std::size_t n);
  void free_erase(device_ptr p, std::size_t n);
  void foreign_insert(device_ptr p, std::size_t n);

  // Pieces (handle_map_pieces.cpp), kept only while wanted: a roomy arena maps no aliases.
  bool pieces_kept() const noexcept { return pieces_kept_; }
  void keep_pieces(bool keep);
  const piece_index& pieces() const noexcept { return pieces_; }
  /// @brief Every view's free ends as pieces, beside a gap or not (the last resort before failing).
  piece_index every_piece() const;

  /// @brief Checks the granules, handles, views, free lists and pieces against each other; @p deferred is the
  /// bytes of address space whose views are removed but which the device has not unmapped yet.
  void validate(std::size_t deferred) const;

 private:
  std::size_t granule_of(device_ptr p) const noexcept { return (p - base_) / granularity_; }
  zone& zone_of(device_ptr p) noexcept { return zones_[zone_index(p)]; }
  void dissolve_view(std::uint32_t v, std::uint32_t u, const unmapped_fn& unmapped);
  // Pieces: every change of a zone's free memory in [p, q) is followed by pieces_changed(p, q) (free_insert
  // and free_erase do it), every view mapped or unmapped by gaps_changed.
  void pieces_changed(device_ptr p, device_ptr q);
  void gaps_changed(device_ptr p, device_ptr q);
  void refresh_point(std::size_t zi, device_ptr x);
  std::size_t suffix_len(std::size_t zi, device_ptr x) const;
  std::size_t prefix_len(std::size_t zi, device_ptr x) const;
  // The free bytes that end at x within the view ending there (pre: x - 1 mapped), and those that start at x
  // within the view starting there (pre: x mapped): a piece where a gap lies beside, or not.
  std::size_t free_ending_at(std::size_t zi, device_ptr x) const;
  std::size_t free_starting_at(std::size_t zi, device_ptr x) const;
  void validate_pieces() const;

  std::size_t granularity_;
  device_ptr base_;
  std::size_t zone_span_;
  std::vector<zone> zones_;
  std::vector<granule> granules_;
  std::vector<handle_rec> handles_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<view_rec> views_;
  std::vector<std::uint32_t> free_views_;
  // A handle going busy stays in the cold set (blocks come and go on the same handles far more often than
  // memory is recycled); drop_stale_cold() drops the busy ones before the set is walked.
  std::set<std::pair<std::size_t, std::uint32_t>> cold_;
  std::map<spare_key, std::uint32_t> spare_;
  std::uint64_t spare_order_ = 0;
  std::size_t spare_bytes_ = 0;
  std::size_t reserved_ = 0;
  std::size_t mapped_ = 0;
  std::size_t cold_bytes_ = 0;
  // Views listed when their last block goes or their handle is aliased, and kept while the handle is cold.
  std::vector<std::uint32_t> idle_views_;
  piece_index pieces_;
  bool pieces_kept_ = false;
};

}  // namespace vram::detail
