// The arena's books (handle_map.hpp): handles, views, granules, the cold set, spares and the free lists.
// The pieces are in handle_map_pieces.cpp.
#include "vram/pool/handle_map.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vram/core/assert.hpp"
#include "vram/core/error.hpp"
#include "vram/core/slots.hpp"

namespace vram::detail {

handle_map::handle_map(device_ptr base, std::size_t zone_span, std::size_t zones, std::size_t granularity)
    : granularity_(granularity), base_(base), zone_span_(zone_span) {
  VRAM_ASSERT(zones > 0 && zone_span % granularity == 0 && base % granularity == 0,
              "handle_map: zones must be whole granules");
  granules_.resize(zone_span * zones / granularity);
  zones_.resize(zones);
  for (std::size_t z = 0; z < zones; ++z) zones_[z].unmapped.insert(zone_base(z), zone_span_);
}

free_space handle_map::free_memory() const noexcept {
  free_space f;
  for (const auto& z : zones_) {
    f.total += z.free.total();
    f.largest = std::max(f.largest, z.free.largest());
  }
  return f;
}

std::size_t handle_map::pinned_by(device_ptr p, std::size_t size) const {
  // Only a handle with several views can show twice, so only those are remembered.
  std::size_t pinned = 0;
  std::vector<std::uint32_t> seen;
  for (device_ptr at = p, end = p + size; at < end;) {
    const auto& gr = granules_[granule_of(at)];
    if (gr.view == none) {
      const auto gap = zones_[zone_index(at)].unmapped.containing(at);
      at = gap ? gap->first + gap->second : (at / granularity_ + 1) * granularity_;
      continue;
    }
    const view_rec& v = views_[gr.view];
    const auto& h = handles_[v.handle];
    if (h.busy == 0) {
      if (h.views.size() == 1) {
        pinned += h.bytes;
      } else if (std::find(seen.begin(), seen.end(), v.handle) == seen.end()) {
        pinned += h.bytes;
        seen.push_back(v.handle);
      }
    }
    at = v.va + h.bytes;
  }
  return pinned;
}

bool handle_map::holds_live(std::uint32_t v) const noexcept {
  for (std::size_t g = granule_of(views_[v].va), n = handles_[views_[v].handle].bytes / granularity_; n > 0; --n, ++g)
    if (granules_[g].live != 0) return true;
  return false;
}

std::uint32_t handle_map::add_handle(phys_handle h, std::size_t bytes) {
  VRAM_ASSERT(bytes > 0 && bytes % granularity_ == 0, "handle_map::add_handle: a handle is whole granules");
  const std::uint32_t s = take_slot(handles_, free_slots_);
  handles_[s] = handle_rec{h, bytes, 0, true, false, {}};
  reserved_ += bytes;
  return s;
}

phys_handle handle_map::remove_handle(std::uint32_t idx) {
  VRAM_ASSERT(handles_[idx].in_use && handles_[idx].views.empty(), "handle_map::remove_handle: the handle is mapped");
  const phys_handle h = handles_[idx].h;
  reserved_ -= handles_[idx].bytes;
  handles_[idx] = handle_rec{};
  free_slots_.push_back(idx);
  return h;
}

void handle_map::add_spare(std::uint32_t idx) {
  handles_[idx].spare_order = ++spare_order_;
  spare_.emplace(spare_key{handles_[idx].bytes, spare_order_}, idx);
  spare_bytes_ += handles_[idx].bytes;
}

void handle_map::take_spare(std::uint32_t idx) {
  const auto it = spare_.find(spare_key{handles_[idx].bytes, handles_[idx].spare_order});
  VRAM_ASSERT(it != spare_.end() && it->second == idx, "handle_map::take_spare: not a spare");
  spare_.erase(it);
  spare_bytes_ -= handles_[idx].bytes;
}

// A handle that a live block touches (through any view) is busy; one that none touches is cold.
void handle_map::touch(device_ptr p, std::size_t size) {
  for (std::size_t g = granule_of(p), last = granule_of(p + size - 1); g <= last; ++g) {
    if (granules_[g].live++ != 0) continue;
    const std::uint32_t idx = views_[granules_[g].view].handle;
    if (handles_[idx].busy++ == 0) cold_bytes_ -= handles_[idx].bytes;
  }
}

void handle_map::untouch(device_ptr p, std::size_t size) {
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
      if (!h.listed) cold_.insert({h.bytes, idx});
      h.listed = true;
      cold_bytes_ += h.bytes;
    }
  }
}

void handle_map::drop_stale_cold() {
  for (auto it = cold_.begin(); it != cold_.end();) {
    auto& h = handles_[it->second];
    if (h.busy == 0) {
      ++it;
      continue;
    }
    h.listed = false;
    it = cold_.erase(it);
  }
}

void handle_map::free_insert(device_ptr p, std::size_t n) {
  zone_of(p).free.insert(p, n);
  pieces_changed(p, p + n);
}

void handle_map::free_erase(device_ptr p, std::size_t n) {
  zone_of(p).free.erase(p, n);
  pieces_changed(p, p + n);
}

void handle_map::foreign_insert(device_ptr p, std::size_t n) { zone_of(p).foreign.insert(p, n); }

std::uint32_t handle_map::add_view(std::uint32_t idx, device_ptr va) {
  auto& h = handles_[idx];
  const std::uint32_t v = take_slot(views_, free_views_);
  views_[v] = view_rec{idx, va};
  zone_of(va).unmapped.erase(va, h.bytes);
  for (std::size_t g = granule_of(va), n = h.bytes / granularity_; n > 0; --n, ++g) granules_[g].view = v;
  gaps_changed(va, va + h.bytes);
  if (h.views.empty()) {
    mapped_ += h.bytes;
    cold_.insert({h.bytes, idx});  // cold until the caller places a block on it
    h.listed = true;
    cold_bytes_ += h.bytes;
  } else {
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
  return v;
}

handle_map::mapping handle_map::remove_view(std::uint32_t v) {
  const device_ptr va = views_[v].va;
  auto& h = handles_[views_[v].handle];
  const std::size_t bytes = h.bytes;
  zone& z = zone_of(va);
  z.free.erase_within(va, bytes);
  z.foreign.erase_within(va, bytes);
  for (std::size_t g = granule_of(va), n = bytes / granularity_; n > 0; --n, ++g) granules_[g].view = none;
  std::erase(h.views, v);
  views_[v] = view_rec{};
  free_views_.push_back(v);
  // The pieces at its ends (its free start after a gap, its free end before one) went with it; the range
  // becomes a gap, with the pieces beside it, only at address_unmapped().
  gaps_changed(va, va + bytes);
  return {va, bytes};
}

void handle_map::address_unmapped(mapping m) {
  zone_of(m.va).unmapped.insert(m.va, m.bytes);
  gaps_changed(m.va, m.va + m.bytes);
}

void handle_map::unmap_handle(std::uint32_t idx, const unmapped_fn& unmapped) {
  auto& h = handles_[idx];
  VRAM_ASSERT(h.busy == 0, "handle_map::unmap_handle: a live block still touches the handle");
  cold_.erase({h.bytes, idx});
  h.listed = false;
  cold_bytes_ -= h.bytes;
  while (!h.views.empty()) unmapped(remove_view(h.views.front()));
  if (!idle_views_.empty()) {
    std::erase_if(idle_views_, [&](std::uint32_t v) { return views_[v].handle == none; });
  }
  mapped_ -= h.bytes;
  add_spare(idx);
}

// An alias view that holds no live block keeps its bytes from every other view: free memory between foreign
// bytes, which only a block fitting there can use. Giving them to a view that holds a live block joins them
// to that view's free memory (the piece an alias took returns to the end it was taken from), and unmapping
// the view turns its address range into a gap that growth can fill.
std::size_t handle_map::dissolve_idle_views(const unmapped_fn& unmapped) {
  std::size_t dissolved = 0;
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
        dissolve_view(v, u, unmapped);
        ++dissolved;
        break;
      }
    }
  }
  return dissolved;
}

// pre: v and u are views of one handle; v holds no live block. v's owned bytes (all free) become u's.
void handle_map::dissolve_view(std::uint32_t v, std::uint32_t u, const unmapped_fn& unmapped) {
  const device_ptr va = views_[v].va, ua = views_[u].va;
  const std::size_t bytes = handles_[views_[v].handle].bytes;
  std::vector<std::pair<std::size_t, std::size_t>> owned;  // (offset in the handle, bytes): v's free ranges
  const auto& ranges = zone_of(va).free.ranges();
  auto it = ranges.upper_bound(va);
  if (it != ranges.begin()) --it;
  for (; it != ranges.end() && it->first < va + bytes; ++it) {
    const device_ptr lo = std::max(it->first, va), hi = std::min(it->first + it->second, va + bytes);
    if (hi > lo) owned.emplace_back(lo - va, hi - lo);
  }
  unmapped(remove_view(v));
  zone& zu = zone_of(ua);
  for (const auto& [off, len] : owned) {
    zu.foreign.erase(ua + off, len);
    free_insert(ua + off, len);
  }
}

void handle_map::validate(std::size_t deferred) const {
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
    if (h.listed != (cold_.count({h.bytes, i}) == 1) || (busy == 0 && !h.listed))
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
  std::size_t spare_listed = 0;
  for (const auto& [key, idx] : spare_) {
    if (key.first != handles_[idx].bytes || key.second != handles_[idx].spare_order || !handles_[idx].views.empty())
      throw invariant_error(fmt::format("arena: spare handle {} listed as ({}, {})", idx, key.first, key.second));
    spare_listed += key.first;
  }
  if (spare_listed != spare_bytes_)
    throw invariant_error(fmt::format("arena: spares listed hold {}, spare handles {}", spare_listed, spare_bytes_));
  validate_pieces();
  std::size_t unmapped = 0, foreign = 0;
  for (const auto& z : zones_) {
    z.free.validate();
    z.unmapped.validate();
    z.foreign.validate();
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
  if (view_bytes != mapped_ + foreign)
    throw invariant_error(fmt::format("arena: views span {} != mapped {} + foreign {}", view_bytes, mapped_, foreign));
  if (unmapped + view_bytes + deferred != span())
    throw invariant_error(fmt::format("arena: unmapped {} + views {} + deferred unmaps {} != span {}", unmapped,
                                      view_bytes, deferred, span()));
}

}  // namespace vram::detail
