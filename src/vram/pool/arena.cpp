// The arena's placement, growth, recycling and release of physical memory; see arena.hpp for the policy.
#include "vram/pool/arena.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "vram/core/error.hpp"
#include "vram/device/device.hpp"

namespace vram::detail {

arena::arena(device& dev, arena_options options)
    : device_(&dev), options_(options), granularity_(dev.granularity()) {
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
  for (auto& h : handles_) {
    if (!h.in_use) continue;
    if (h.va != 0) device_->mem_unmap(h.va, h.bytes);
    device_->mem_release(h.h);
  }
  device_->address_free(base_, span());
}

std::size_t arena::handle_cap() const noexcept {
  // Large handles cost fewer driver calls; small ones can be recycled more finely. A handle is at most
  // max_handle_bytes, at most 1/1024 of the device, and at most 1/16 of what the device (as far as this
  // arena knows) has left: on a roomy device handles are large, and as the device fills they shrink to
  // the granule, so memory can be moved where it is wanted.
  const std::size_t left = device_total_ > reserved_ ? device_total_ - reserved_ : 0;
  const std::size_t cap = std::min({options_.max_handle_bytes, device_total_ / 1024, left / 16});
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

// A handle that a live block touches is busy; one that none touches is cold (reclaimable).
void arena::touch(device_ptr p, std::size_t size) {
  for (std::size_t g = granule_of(p), last = granule_of(p + size - 1); g <= last; ++g) {
    if (granules_[g].live++ != 0) continue;
    const std::uint32_t idx = granules_[g].handle;
    if (handles_[idx].busy++ == 0) reclaimable_.erase({handles_[idx].bytes, idx});
  }
}

void arena::untouch(device_ptr p, std::size_t size) {
  for (std::size_t g = granule_of(p), last = granule_of(p + size - 1); g <= last; ++g) {
    if (--granules_[g].live != 0) continue;
    const std::uint32_t idx = granules_[g].handle;
    if (--handles_[idx].busy == 0) reclaimable_.insert({handles_[idx].bytes, idx});
  }
}

device_ptr arena::allocate_mapped(std::size_t size, std::size_t align, std::size_t zi) {
  const auto p = zones_[zi].free.take_best_fit(size, align);
  if (!p) return 0;
  in_use_ += size;
  touch(*p, size);
  return *p;
}

device_ptr arena::allocate(std::size_t size, std::size_t align, std::size_t zi) {
  std::optional<device_ptr> p = zones_[zi].free.take_best_fit(size, align);
  if (!p) {
    p = grow(size, align, zi);
    if (*p == 0) return 0;
  }
  in_use_ += size;
  touch(*p, size);
  return *p;
}

void arena::deallocate(device_ptr p, std::size_t size) {
  in_use_ -= size;
  zone_of(p).free.insert(p, size);
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
  if (options_.limit != 0 && reserved_ + bytes > options_.limit) return no_handle;  // as if the device were full
  const phys_handle h = device_->mem_create(bytes);
  if (h == 0) return no_handle;
  const auto s = new_slot();
  handles_[s] = handle_rec{h, 0, bytes, 0, true};
  reserved_ += bytes;
  ++counters_.handles_created;
  return s;
}

void arena::unmap_handle(std::uint32_t idx) {
  if (before_unmap_) before_unmap_();
  auto& h = handles_[idx];
  zone& z = zone_of(h.va);
  reclaimable_.erase({h.bytes, idx});
  z.free.erase(h.va, h.bytes);
  device_->mem_unmap(h.va, h.bytes);
  for (std::size_t g = granule_of(h.va), n = h.bytes / granularity_; n > 0; --n, ++g) granules_[g].handle = no_handle;
  z.unmapped.insert(h.va, h.bytes);
  mapped_ -= h.bytes;
  h.va = 0;
  spare_.emplace(h.bytes, idx);
  ++counters_.handles_unmapped;
}

void arena::release_spare(std::uint32_t idx) {
  device_->mem_release(handles_[idx].h);
  reserved_ -= handles_[idx].bytes;
  ++counters_.handles_released;
  handles_[idx] = handle_rec{};
  free_slots_.push_back(idx);
}

device_ptr arena::grow(std::size_t size, std::size_t align, std::size_t zi) {
  ++counters_.growths;
  zone& z = zones_[zi];
  // As an expandable segment does, extend the free range that ends where the zone's mapped memory ends, so
  // the block joins what is free there and only the rest is mapped.
  const device_ptr zone_end = zone_base(zi) + zone_span_;
  const auto frontier = z.unmapped.containing(zone_end - 1);
  const device_ptr top = frontier ? frontier->first : zone_end;
  std::size_t tail = 0;
  if (align <= 512 && frontier && top > zone_base(zi)) {
    if (auto f = z.free.containing(top - 1)) tail = top - f->first;
    if (tail >= size) tail = 0;  // cannot happen (best fit would have taken it); keep the plain path
  }
  const std::size_t need = round_up(size - tail, granularity_);
  // The block's whole granules in handles of their own, its partial last granule in another: when the block
  // is freed its own handles turn cold at once, whatever lands beside it.
  const std::size_t whole = (size - tail) / granularity_ * granularity_;

  std::vector<std::uint32_t> use;  // handles to map side by side
  std::size_t have = 0;
  auto take_spare = [&](std::multimap<std::size_t, std::uint32_t>::iterator it) {
    have += it->first;
    use.push_back(it->second);
    spare_.erase(it);
  };
  // Spares first: they cost no creation. The smallest that covers the rest, else the largest ones.
  auto cover_from_spares = [&] {
    while (have < need && !spare_.empty()) {
      auto it = spare_.lower_bound(need - have);
      take_spare(it != spare_.end() ? it : std::prev(spare_.end()));
    }
  };
  // Handles under the free tail this block extends stay where they are.
  auto in_tail = [&](std::uint32_t idx) {
    return tail > 0 && handles_[idx].va < top && handles_[idx].va + handles_[idx].bytes > top - tail;
  };
  // Recycling: unmap cold handles into spares, the smallest that covers the rest, else the largest ones.
  auto reclaim = [&](std::size_t want) {
    std::size_t got = 0;
    while (got < want && !reclaimable_.empty()) {
      auto pick = reclaimable_.lower_bound({want - got, 0});
      while (pick != reclaimable_.end() && in_tail(pick->second)) ++pick;
      if (pick == reclaimable_.end()) {
        for (auto r = reclaimable_.rbegin(); r != reclaimable_.rend(); ++r) {
          if (!in_tail(r->second)) {
            pick = std::prev(r.base());
            break;
          }
        }
        if (pick == reclaimable_.end()) break;
      }
      got += pick->first;
      unmap_handle(pick->second);
    }
  };
  auto give_back = [&] {
    for (auto s : use) spare_.emplace(handles_[s].bytes, s);
    use.clear();
    have = 0;
  };

  cover_from_spares();
  const double budget = (1.0 + options_.max_cached_ratio) * static_cast<double>(in_use_ + size);
  if (have < need && static_cast<double>(reserved_ + (need - have)) > budget) {
    reclaim(need - have);
    cover_from_spares();
  }
  bool recovering = false;
  while (have < need) {
    std::size_t want = need - have;
    if (have == 0 && whole > 0 && whole < need) want = whole;
    want = std::min(want, handle_cap());
    const auto idx = create_handle(want);
    if (idx != no_handle) {
      have += handles_[idx].bytes;
      use.push_back(idx);
      continue;
    }
    // Refused: recycle every cold handle, release the spares this growth cannot use, and retry once.
    if (recovering) {
      give_back();
      return 0;
    }
    recovering = true;
    ++counters_.out_of_memory_recoveries;
    reclaim(SIZE_MAX);
    cover_from_spares();
    while (!spare_.empty()) {
      release_spare(spare_.begin()->second);
      spare_.erase(spare_.begin());
    }
  }

  std::optional<device_ptr> va;
  if (frontier && frontier->second >= have) {
    va = top;
    z.unmapped.erase(top, have);
  } else {
    tail = 0;  // no room at the top: map elsewhere, block at the start
    va = z.unmapped.take_best_fit(have, granularity_);
  }
  if (!va || have < size - tail) {
    // No address range left that holds the mapping (the zone's range is many times the device, so this takes
    // a long run of blocks drifting upward): fail this request, keeping the handles as spares.
    if (va) z.unmapped.insert(*va, have);
    give_back();
    ++counters_.address_space_exhausted;
    return 0;
  }
  device_ptr at = *va;
  for (auto s : use) {
    auto& h = handles_[s];
    device_->mem_map(at, h.bytes, h.h);
    device_->set_access(at, h.bytes);
    h.va = at;
    for (std::size_t g = granule_of(at), n = h.bytes / granularity_; n > 0; --n, ++g) granules_[g].handle = s;
    reclaimable_.insert({h.bytes, s});
    mapped_ += h.bytes;
    ++counters_.handles_mapped;
    at += h.bytes;
  }
  const device_ptr block = *va - tail;
  z.free.insert(*va, have);
  z.free.erase(block, size);
  return block;
}

std::size_t arena::trim() {
  const std::size_t before = reserved_;
  while (!reclaimable_.empty()) unmap_handle(reclaimable_.begin()->second);
  while (!spare_.empty()) {
    release_spare(spare_.begin()->second);
    spare_.erase(spare_.begin());
  }
  return before - reserved_;
}

std::vector<arena::handle_view> arena::handles() const {
  std::vector<handle_view> out;
  for (const auto& h : handles_)
    if (h.in_use) out.push_back({h.va, h.bytes, h.busy});
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
  std::size_t reserved = 0, mapped = 0;
  for (std::uint32_t i = 0; i < handles_.size(); ++i) {
    const auto& h = handles_[i];
    if (!h.in_use) continue;
    reserved += h.bytes;
    if (h.va == 0) {
      if (h.busy != 0) throw invariant_error(fmt::format("arena: spare handle {} has busy granules", i));
      continue;
    }
    mapped += h.bytes;
    std::uint32_t busy = 0;
    for (std::size_t g = granule_of(h.va), n = h.bytes / granularity_; n > 0; --n, ++g) {
      if (granules_[g].handle != i)
        throw invariant_error(fmt::format("arena: granule {} does not point back to handle {}", g, i));
      busy += granules_[g].live > 0;
    }
    if (busy != h.busy)
      throw invariant_error(fmt::format("arena: handle {} counts {} busy granules, has {}", i, h.busy, busy));
    if ((busy == 0) != (reclaimable_.count({h.bytes, i}) == 1))
      throw invariant_error(fmt::format("arena: handle {}: cold set disagrees with busy = {}", i, busy));
    if (busy == 0) {
      const auto& z = zones_[(h.va - base_) / zone_span_];
      const auto c = z.free.containing(h.va);
      if (!c || c->first + c->second < h.va + h.bytes)
        throw invariant_error(fmt::format("arena: cold handle {} not wholly free", i));
    }
  }
  for (std::size_t g = 0; g < granules_.size(); ++g)
    if (granules_[g].handle == no_handle && granules_[g].live != 0)
      throw invariant_error(fmt::format("arena: unmapped granule {} has live blocks", g));
  if (reserved != reserved_) throw invariant_error(fmt::format("arena: reserved {} but handles hold {}", reserved_, reserved));
  if (mapped != mapped_) throw invariant_error(fmt::format("arena: mapped {} but mapped handles hold {}", mapped_, mapped));
  std::size_t free = 0, unmapped = 0;
  for (const auto& z : zones_) {
    z.free.validate();
    z.unmapped.validate();
    free += z.free.total();
    unmapped += z.unmapped.total();
    for (const auto& [addr, size] : z.free.ranges())
      for (std::size_t g = granule_of(addr), last = granule_of(addr + size - 1); g <= last; ++g)
        if (granules_[g].handle == no_handle)
          throw invariant_error(fmt::format("arena: free range at {:#x} over an unmapped granule", addr));
  }
  if (mapped_ != in_use_ + free)
    throw invariant_error(fmt::format("arena: mapped {} != in use {} + free {}", mapped_, in_use_, free));
  if (unmapped + mapped_ != span())
    throw invariant_error(fmt::format("arena: unmapped {} + mapped {} != span {}", unmapped, mapped_, span()));
}

}  // namespace vram::detail
