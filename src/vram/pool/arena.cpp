// The arena's bookkeeping: handles and their views, which granules live blocks touch, recycling and
// release of cold handles, trim, and validate(). Growth, the placement of blocks that need memory mapped,
// is in arena_placement.cpp; see arena.hpp for the policy.
#include "vram/pool/arena.hpp"
#include "vram/core/assert.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vram/core/error.hpp"
#include "vram/device/device.hpp"

namespace vram::detail {

arena::arena(device& dev, arena_options options)
    : device_(&dev), options_(options), pace_(options.burst_bytes, options.burst_window_ns),
      granularity_(dev.granularity()) {
  const std::size_t total = dev.mem_info().total;
  device_total_ = total;
  const std::size_t zones = std::max<std::size_t>(options_.zones, 1);
  zone_span_ = round_up(std::max(total, granularity_) * std::max<std::size_t>(options_.address_space_factor, 1),
                        granularity_);
  base_ = device_->address_reserve(zone_span_ * zones, granularity_);
  granules_.resize(zone_span_ * zones / granularity_);
  zones_.resize(zones);
  for (std::size_t z = 0; z < zones; ++z) zones_[z].unmapped.insert(zone_base(z), zone_span_);
}

arena::~arena() {
  // The owner settles deferred unmaps first (pool_resource's destructor, while its events exist).
  for (const auto& d : deferred_) device_->mem_unmap(d.va, d.bytes);
  for (const auto& v : views_)
    if (v.handle != none) device_->mem_unmap(v.va, handles_[v.handle].bytes);
  for (const auto& h : handles_)
    if (h.in_use) device_->mem_release(h.h);
  device_->address_free(base_, span());
}

std::size_t arena::capacity() const noexcept {
  return options_.limit != 0 ? std::min(device_total_, options_.limit) : device_total_;
}

std::size_t arena::lean_bound(std::size_t s) const noexcept {
  return reserve_bound(options_.reserve_ratio, peak_in_use_, in_use_, s, capacity());
}

std::size_t arena::handle_cap() const noexcept {
  // Large handles cost fewer driver calls; small ones can be recycled more finely. A handle is at most
  // max_handle_bytes, at most 1/1024 of the memory the arena may hold (the device, or the limit), and at most
  // 1/16 of what is left of it (when lean, of what is left under the reserve bound): with room, handles are
  // large, and as memory runs out they shrink to the granule, so memory can be moved where it is wanted.
  const std::size_t cap_total = capacity();
  const std::size_t bound = lean() ? lean_bound(0) : cap_total;
  const std::size_t left = bound > reserved_ ? bound - reserved_ : 0;
  std::size_t cap = std::min({options_.max_handle_bytes, cap_total / 1024, left / 16});
  // Outside a burst of growth, handles are small: a handle that outlives the block it was made for keeps all
  // its memory for whatever block still sits on it, so small ones are what lets free memory move. A burst
  // (a training step mapping its working set in milliseconds) gets large ones: there the calls are the cost.
  if (!pace_.bursting() && options_.small_handle_bytes > 0) cap = std::min(cap, options_.small_handle_bytes);
  return std::max(cap / granularity_ * granularity_, granularity_);
}

free_space arena::free_memory() const noexcept {
  free_space f;
  for (const auto& z : zones_) {
    f.total += z.free.total();
    f.largest = std::max(f.largest, z.free.largest());
  }
  return f;
}

// A handle that a live block touches (through any view) is busy; one that none touches is cold.
void arena::touch(device_ptr p, std::size_t size) {
  for (std::size_t g = granule_of(p), last = granule_of(p + size - 1); g <= last; ++g) {
    if (granules_[g].live++ != 0) continue;
    const std::uint32_t idx = views_[granules_[g].view].handle;
    if (handles_[idx].busy++ == 0) cold_bytes_ -= handles_[idx].bytes;
  }
}

void arena::untouch(device_ptr p, std::size_t size) {
  for (std::size_t g = granule_of(p), last = granule_of(p + size - 1); g <= last; ++g) {
    if (--granules_[g].live != 0) continue;
    auto& view = views_[granules_[g].view];
    const std::uint32_t idx = view.handle;
    if (handles_[idx].views.size() > 1 && !view.idle_listed) {
      view.idle_listed = true;
      idle_views_.push_back(granules_[g].view);
    }
    if (--handles_[idx].busy == 0) {
      auto& h = handles_[idx];
      if (!h.listed) reclaimable_.insert({h.bytes, idx});
      h.listed = true;
      cold_bytes_ += h.bytes;
    }
  }
}

void arena::drop_stale_cold() {
  for (auto it = reclaimable_.begin(); it != reclaimable_.end();) {
    auto& h = handles_[it->second];
    if (h.busy == 0) {
      ++it;
      continue;
    }
    h.listed = false;
    it = reclaimable_.erase(it);
  }
}

void arena::deallocate(device_ptr p, std::size_t size) {
  in_use_ -= size;
  free_insert(p, size);
  untouch(p, size);
}

std::uint32_t arena::new_slot() {
  if (!free_slots_.empty()) {
    const auto s = free_slots_.back();
    free_slots_.pop_back();
    return s;
  }
  handles_.emplace_back();
  return static_cast<std::uint32_t>(handles_.size() - 1);
}

std::uint32_t arena::create_handle(std::size_t bytes) {
  if (options_.limit != 0 && reserved_ + bytes > options_.limit) return none;  // as if the device were full
  const phys_handle h = device_->mem_create(bytes);
  if (h == 0) return none;
  const auto s = new_slot();
  handles_[s] = handle_rec{h, bytes, 0, true, false, {}};
  reserved_ += bytes;
  ++counters_.handles_created;
  return s;
}

// Maps the handle whole at va as a new view. The caller says which of its bytes the view owns (free-listing
// them or placing a block there) and marks the rest foreign.
std::uint32_t arena::map_view(std::uint32_t idx, device_ptr va) {
  auto& h = handles_[idx];
  device_->mem_map(va, h.bytes, h.h);
  device_->set_access(va, h.bytes);
  std::uint32_t v;
  if (!free_views_.empty()) {
    v = free_views_.back();
    free_views_.pop_back();
  } else {
    v = static_cast<std::uint32_t>(views_.size());
    views_.emplace_back();
  }
  views_[v] = view_rec{idx, va};
  zone_of(va).unmapped.erase(va, h.bytes);
  for (std::size_t g = granule_of(va), n = h.bytes / granularity_; n > 0; --n, ++g) granules_[g].view = v;
  gaps_changed(va, va + h.bytes);
  if (h.views.empty()) {
    mapped_ += h.bytes;
    reclaimable_.insert({h.bytes, idx});  // cold until the caller places a block on it
    h.listed = true;
    cold_bytes_ += h.bytes;
  } else {
    ++counters_.aliases_mapped;
    // The views it had may hold no live block (a cold handle's free end can be aliased): listed, they give
    // their bytes to this one before the next tight growth if they still hold none then.
    for (const std::uint32_t u : h.views) {
      if (!views_[u].idle_listed) {
        views_[u].idle_listed = true;
        idle_views_.push_back(u);
      }
    }
  }
  h.views.push_back(v);
  ++counters_.handles_mapped;
  return v;
}

// Unmaps one view: its owned bytes leave the free list, its foreign bytes the foreign list, its address range
// becomes a gap and its slot is freed. The caller takes it off the handle's list of views.
void arena::unmap_view(std::uint32_t v) {
  const device_ptr va = views_[v].va;
  const std::size_t bytes = handles_[views_[v].handle].bytes;
  zone& z = zone_of(va);
  z.free.erase_within(va, bytes);
  z.foreign.erase_within(va, bytes);
  for (std::size_t g = granule_of(va), n = bytes / granularity_; n > 0; --n, ++g) granules_[g].view = none;
  const std::uint64_t fence = fence_.fence ? fence_.fence() : 0;
  if (fence != 0 && !fence_.done(fence, false)) {
    deferred_.push_back({va, bytes, fence});  // queued work may still use it: unmapped once the fence is done
    ++counters_.unmaps_deferred;
  } else {
    device_->mem_unmap(va, bytes);
    z.unmapped.insert(va, bytes);
    gaps_changed(va, va + bytes);
  }
  views_[v] = view_rec{};
  free_views_.push_back(v);
  ++counters_.handles_unmapped;
}

// pre: the handle is cold. Every view goes: its owned bytes (all free) leave the free list, its foreign
// bytes the foreign list, and the handle becomes a spare.
void arena::unmap_handle(std::uint32_t idx) {
  auto& h = handles_[idx];
  VRAM_ASSERT(h.busy == 0, "arena::unmap_handle: a live block still touches the handle");
  reclaimable_.erase({h.bytes, idx});
  h.listed = false;
  cold_bytes_ -= h.bytes;
  for (const std::uint32_t v : h.views) unmap_view(v);
  h.views.clear();
  if (!idle_views_.empty()) {
    std::erase_if(idle_views_, [&](std::uint32_t v) { return views_[v].handle == none; });
  }
  mapped_ -= h.bytes;
  spare_.emplace(h.bytes, idx);
  spare_bytes_ += h.bytes;
}

bool arena::holds_live(std::uint32_t v) const noexcept {
  for (std::size_t g = granule_of(views_[v].va), n = handles_[views_[v].handle].bytes / granularity_; n > 0; --n, ++g)
    if (granules_[g].live != 0) return true;
  return false;
}

// An alias view that holds no live block keeps its bytes from every other view: free memory between foreign
// bytes, which only a block fitting there can use. Giving them to a view that holds a live block joins them
// to that view's free memory (the piece an alias took returns to the end it was taken from), and unmapping
// the view turns its address range into a gap that growth can fill.
void arena::dissolve_idle_views() {
  auto listed = std::move(idle_views_);
  idle_views_.clear();
  for (const std::uint32_t v : listed) {
    const std::uint32_t idx = views_[v].handle;
    // A cold handle's views stay listed: once a block makes the handle busy again through one of them, the
    // others hold no live block and are to give their bytes back (no later free would list them again).
    if (idx != none && handles_[idx].busy == 0 && handles_[idx].views.size() > 1) {
      idle_views_.push_back(v);
      continue;
    }
    views_[v].idle_listed = false;
    if (idx == none || handles_[idx].views.size() < 2 || holds_live(v)) continue;
    for (const std::uint32_t u : handles_[idx].views) {
      if (u != v && holds_live(u)) {
        dissolve_view(v, u);
        break;
      }
    }
  }
}

// pre: v and u are views of one handle; v holds no live block. v's owned bytes (all free) become u's.
void arena::dissolve_view(std::uint32_t v, std::uint32_t u) {
  const std::uint32_t idx = views_[v].handle;
  auto& h = handles_[idx];
  const device_ptr va = views_[v].va, ua = views_[u].va;
  std::vector<std::pair<std::size_t, std::size_t>> owned;  // (offset in the handle, bytes): v's free ranges
  const auto& ranges = zone_of(va).free.ranges();
  auto it = ranges.upper_bound(va);
  if (it != ranges.begin()) --it;
  for (; it != ranges.end() && it->first < va + h.bytes; ++it) {
    const device_ptr lo = std::max(it->first, va), hi = std::min(it->first + it->second, va + h.bytes);
    if (hi > lo) owned.emplace_back(lo - va, hi - lo);
  }
  unmap_view(v);
  std::erase(h.views, v);
  ++counters_.views_dissolved;
  zone& zu = zone_of(ua);
  for (const auto& [off, len] : owned) {
    zu.foreign.erase(ua + off, len);
    free_insert(ua + off, len);
  }
}

void arena::take_spare(std::uint32_t idx) {
  for (auto [it, end] = spare_.equal_range(handles_[idx].bytes); it != end; ++it) {
    if (it->second == idx) {
      spare_.erase(it);
      spare_bytes_ -= handles_[idx].bytes;
      return;
    }
  }
}

// pre: the handle is a spare and no longer in spare_.
void arena::release_spare(std::uint32_t idx) {
  VRAM_ASSERT(handles_[idx].in_use && handles_[idx].views.empty(), "arena::release_spare: the handle is mapped");
  device_->mem_release(handles_[idx].h);
  reserved_ -= handles_[idx].bytes;
  ++counters_.handles_released;
  handles_[idx] = handle_rec{};
  free_slots_.push_back(idx);
}

void arena::settle_unmaps(bool wait) {
  std::erase_if(deferred_, [&](const deferred_unmap& d) {
    if (!fence_.done(d.fence, wait)) return false;
    device_->mem_unmap(d.va, d.bytes);
    zone_of(d.va).unmapped.insert(d.va, d.bytes);
    gaps_changed(d.va, d.va + d.bytes);
    return true;
  });
}

std::size_t arena::deferred_unmap_bytes() const noexcept {
  std::size_t n = 0;
  for (const auto& d : deferred_) n += d.bytes;
  return n;
}

std::size_t arena::trim() {
  const std::size_t before = reserved_;
  drop_stale_cold();
  while (!reclaimable_.empty()) unmap_handle(reclaimable_.begin()->second);
  settle_unmaps(true);  // released handles return their memory only once no address maps them
  while (!spare_.empty()) {
    const auto idx = spare_.begin()->second;
    take_spare(idx);
    release_spare(idx);
  }
  return before - reserved_;
}

std::vector<arena::handle_view> arena::handles() const {
  std::vector<handle_view> out;
  for (const auto& h : handles_) {
    if (!h.in_use) continue;
    handle_view hv{{}, h.bytes, h.busy};
    for (const auto v : h.views) hv.views.push_back(views_[v].va);
    out.push_back(std::move(hv));
  }
  return out;
}

std::vector<std::pair<device_ptr, std::size_t>> arena::free_ranges() const {
  std::vector<std::pair<device_ptr, std::size_t>> out;
  for (const auto& z : zones_) {
    for (const auto& r : z.free.ranges()) out.emplace_back(r);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void arena::validate() const {
  std::size_t reserved = 0, mapped = 0, view_bytes = 0, spare = 0;
  std::size_t view_count = 0;
  for (std::uint32_t i = 0; i < handles_.size(); ++i) {
    const auto& h = handles_[i];
    if (!h.in_use) continue;
    reserved += h.bytes;
    if (h.views.empty()) {
      if (h.busy != 0) throw invariant_error(fmt::format("arena: spare handle {} has busy granules", i));
      spare += h.bytes;
      continue;
    }
    mapped += h.bytes;
    std::uint32_t busy = 0;
    // Each byte of the handle is owned by exactly one view: gather, per view, the handle offsets that are not
    // foreign there, and check that together they tile [0, bytes) once.
    std::vector<std::pair<std::size_t, std::size_t>> owned;  // [from, to) in handle offsets
    for (const auto v : h.views) {
      ++view_count;
      const auto& vr = views_[v];
      if (vr.handle != i) throw invariant_error(fmt::format("arena: view {} of handle {} names handle {}", v, i, vr.handle));
      view_bytes += h.bytes;
      for (std::size_t g = granule_of(vr.va), n = h.bytes / granularity_; n > 0; --n, ++g) {
        if (granules_[g].view != v)
          throw invariant_error(fmt::format("arena: granule {} does not point back to view {} of handle {}", g, v, i));
        busy += granules_[g].live > 0;
      }
      const auto& z = zones_[zone_index(vr.va)];
      std::size_t at = 0;
      for (const auto& [fa, fl] : z.foreign.ranges()) {
        if (fa + fl <= vr.va || fa >= vr.va + h.bytes) continue;
        const std::size_t from = std::max(fa, vr.va) - vr.va, to = std::min(fa + fl, vr.va + h.bytes) - vr.va;
        if (from > at) owned.emplace_back(at, from);
        at = to;
      }
      if (at < h.bytes) owned.emplace_back(at, h.bytes);
    }
    std::sort(owned.begin(), owned.end());
    std::size_t covered = 0;
    for (const auto& [from, to] : owned) {
      if (from != covered)
        throw invariant_error(fmt::format("arena: handle {}: bytes [{}, {}) owned by {} views", i, std::min(from, covered),
                                          std::max(from, covered), from < covered ? "two" : "no"));
      covered = to;
    }
    if (covered != h.bytes) throw invariant_error(fmt::format("arena: handle {}: bytes from {} owned by no view", i, covered));
    if (busy != h.busy)
      throw invariant_error(fmt::format("arena: handle {} counts {} busy granules, has {}", i, h.busy, busy));
    if (h.listed != (reclaimable_.count({h.bytes, i}) == 1) || (busy == 0 && !h.listed))
      throw invariant_error(fmt::format("arena: handle {}: cold set disagrees with busy = {}", i, busy));
  }
  std::size_t live_views = 0;
  for (const auto& v : views_) live_views += v.handle != none;
  if (live_views != view_count) throw invariant_error(fmt::format("arena: {} views in use, handles name {}", live_views, view_count));
  for (std::size_t g = 0; g < granules_.size(); ++g)
    if (granules_[g].view == none && granules_[g].live != 0)
      throw invariant_error(fmt::format("arena: unmapped granule {} has live blocks", g));
  if (reserved != reserved_) throw invariant_error(fmt::format("arena: reserved {} but handles hold {}", reserved_, reserved));
  if (mapped != mapped_) throw invariant_error(fmt::format("arena: mapped {} but mapped handles hold {}", mapped_, mapped));
  if (spare != spare_bytes_) throw invariant_error(fmt::format("arena: spares {} but spare handles hold {}", spare_bytes_, spare));
  validate_pieces();
  std::size_t free = 0, unmapped = 0, foreign = 0;
  for (const auto& z : zones_) {
    z.free.validate();
    z.unmapped.validate();
    z.foreign.validate();
    free += z.free.total();
    unmapped += z.unmapped.total();
    foreign += z.foreign.total();
    for (const auto& [addr, size] : z.free.ranges()) {
      for (std::size_t g = granule_of(addr), last = granule_of(addr + size - 1); g <= last; ++g)
        if (granules_[g].view == none)
          throw invariant_error(fmt::format("arena: free range at {:#x} over an unmapped granule", addr));
      if (z.foreign.overlaps(addr, size))
        throw invariant_error(fmt::format("arena: free range at {:#x} overlaps foreign memory", addr));
    }
  }
  if (mapped_ != in_use_ + free)
    throw invariant_error(fmt::format("arena: mapped {} != in use {} + free {}", mapped_, in_use_, free));
  if (view_bytes != mapped_ + foreign)
    throw invariant_error(fmt::format("arena: views span {} != mapped {} + foreign {}", view_bytes, mapped_, foreign));
  const std::size_t deferred = deferred_unmap_bytes();
  if (unmapped + view_bytes + deferred != span())
    throw invariant_error(fmt::format("arena: unmapped {} + views {} + deferred unmaps {} != span {}", unmapped,
                                      view_bytes, deferred, span()));
}

}  // namespace vram::detail
