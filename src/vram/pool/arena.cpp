// The arena's dealings with the device: creating, mapping, unmapping and releasing handles, and writing each
// down in its books (handle_map.hpp); deferred unmaps, trim, and validate(). Growth is in arena_growth.cpp;
// see arena.hpp for the policy.
#include "vram/pool/arena.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vram/core/assert.hpp"
#include "vram/core/error.hpp"
#include "vram/device/device.hpp"

namespace vram::detail {

namespace {

std::size_t zone_span_for(std::size_t total, std::size_t granularity, std::size_t factor) {
  return round_up(std::max(total, granularity) * std::max<std::size_t>(factor, 1), granularity);
}

/// @brief The zones' address range: address_space_factor x the device per zone, or, where the device has not
/// that much address space (a very large simulated device), half as much, down to once the device.
handle_map reserve_zones(device& dev, std::size_t total, const arena_options& o) {
  const std::size_t zones = std::max<std::size_t>(o.zones, 1), g = dev.granularity();
  for (std::size_t factor = std::max<std::size_t>(o.address_space_factor, 1);; factor /= 2) {
    const std::size_t span = zone_span_for(total, g, factor);
    try {
      return handle_map(dev.address_reserve(span * zones, g), span, zones, g);
    } catch (const device_error&) {
      if (factor <= 1) throw;
    }
  }
}

}  // namespace

arena::arena(device& dev, arena_options options) : arena(dev, options, dev.mem_info().total) {}

arena::arena(device& dev, arena_options options, std::size_t total)
    : device_(&dev),
      options_(options),
      pace_(options.burst_bytes, options.burst_window_ns),
      device_total_(total),
      map_(reserve_zones(dev, total, options)) {}

arena::~arena() {
  // The owner settles deferred unmaps first (pool_resource's destructor, while its events exist).
  for (const auto& d : deferred_) device_->mem_unmap(d.va, d.bytes);
  for (const auto& h : map_.handle_slots()) {
    for (const auto v : h.views) device_->mem_unmap(map_.view(v).va, h.bytes);
  }
  for (const auto& h : map_.handle_slots())
    if (h.in_use) device_->mem_release(h.h);
  device_->address_free(map_.base(), map_.span());
}

std::size_t arena::capacity() const noexcept {
  return options_.limit != 0 ? std::min(device_total_, options_.limit) : device_total_;
}

std::size_t arena::lean_bound(std::size_t s) const noexcept {
  return reserve_bound(options_.reserve_ratio, peak_in_use_, in_use_, s, capacity());
}

std::size_t arena::handle_cap(std::size_t request) const noexcept {
  // Large handles cost fewer driver calls; small ones can be recycled more finely. A handle is at most
  // max_handle_bytes (but for a block of block_handles x max_handle_bytes or more, below), at most 1/1024 of
  // the memory the arena may hold (the device, or the limit), and at most 1/16 of what is left of it (when
  // lean, of what is left under the reserve bound): with room, handles are large, and as memory runs out
  // they shrink to the granule, so memory can be moved where it is wanted.
  const std::size_t g = map_.granularity();
  const std::size_t cap_total = capacity();
  const std::size_t bound = lean() ? lean_bound(0) : cap_total;
  const std::size_t left = bound > map_.reserved() ? bound - map_.reserved() : 0;
  std::size_t cap = std::min({options_.max_handle_bytes, cap_total / 1024, left / 16});
  // Outside a burst of growth, handles are small: a handle that outlives the block it was made for keeps all
  // its memory for whatever block still sits on it, so small ones are what lets free memory move. A burst
  // (a training step mapping its working set in milliseconds) gets large ones: there the calls are the cost.
  if (!pace_.bursting() && options_.small_handle_bytes > 0) cap = std::min(cap, options_.small_handle_bytes);
  // A block of block_handles x max_handle or more (a KV cache or weights allocated whole) is made of about
  // block_handles handles: a handle's calls cost far less than eight times as much at 512 MiB as at 64 MiB
  // (cuMemCreate, cuMemMap and cuMemSetAccess together 51-78 us against 28-43 us in four `vram probe --costs`
  // runs on two H100s: eight of 64 MiB cost 4.3-5.0x one of 512 MiB, 2.0-3.3x with the unmap and release);
  // and when the block is freed its handles go cold together, each an eighth of it. Not with max_handle 0.
  const std::size_t n = options_.block_handles;
  if (n > 0 && options_.max_handle_bytes > 0 && request / n >= options_.max_handle_bytes)
    cap = std::max(cap, std::min(request / n, left / 16));
  return std::max(cap / g * g, g);
}

void arena::deallocate(device_ptr p, std::size_t size) {
  in_use_ -= size;
  map_.free_insert(p, size);
  map_.untouch(p, size);
}

std::uint32_t arena::create_handle(std::size_t bytes) {
  if (options_.limit != 0 && map_.reserved() + bytes > options_.limit) return handle_map::none;  // as if full
  const phys_handle h = device_->mem_create(bytes);
  if (h == 0) return handle_map::none;
  ++counters_.handles_created;
  return map_.add_handle(h, bytes);
}

// Maps the handle whole at va as a new view. The caller says which of its bytes the view owns (free-listing
// them or placing a block there) and marks the rest foreign.
void arena::map_view(std::uint32_t idx, device_ptr va) {
  const auto& h = map_.handle(idx);
  device_->mem_map(va, h.bytes, h.h);
  device_->set_access(va, h.bytes);
  if (!h.views.empty()) ++counters_.aliases_mapped;
  map_.add_view(idx, va);
  ++counters_.handles_mapped;
}

void arena::unmapped(handle_map::mapping m) {
  const std::uint64_t fence = fence_.fence ? fence_.fence() : 0;
  if (fence != 0 && !fence_.done(fence, false)) {
    deferred_.push_back({m.va, m.bytes, fence});  // queued work may still use it: unmapped once the fence is done
    ++counters_.unmaps_deferred;
  } else {
    device_->mem_unmap(m.va, m.bytes);
    map_.address_unmapped(m);
  }
  ++counters_.handles_unmapped;
}

void arena::unmap_handle(std::uint32_t idx) {
  map_.unmap_handle(idx, [this](handle_map::mapping m) { unmapped(m); });
}

void arena::release_spare(std::uint32_t idx) {
  device_->mem_release(map_.remove_handle(idx));
  ++counters_.handles_released;
}

void arena::recycle_every_cold_handle() {
  map_.drop_stale_cold();
  while (!map_.cold().empty()) unmap_handle(map_.cold().begin()->second);
}

void arena::release_every_spare() {
  while (!map_.spares().empty()) {
    const auto idx = map_.spares().begin()->second;
    map_.take_spare(idx);
    release_spare(idx);
  }
}

void arena::settle_unmaps(bool wait) {
  std::erase_if(deferred_, [&](const deferred_unmap& d) {
    if (!fence_.done(d.fence, wait)) return false;
    device_->mem_unmap(d.va, d.bytes);
    map_.address_unmapped({d.va, d.bytes});
    return true;
  });
}

std::size_t arena::deferred_unmap_bytes() const noexcept {
  std::size_t n = 0;
  for (const auto& d : deferred_) n += d.bytes;
  return n;
}

std::size_t arena::trim() {
  const std::size_t before = map_.reserved();
  recycle_every_cold_handle();
  settle_unmaps(true);  // released handles return their memory only once no address maps them
  release_every_spare();
  return before - map_.reserved();
}

std::vector<arena::handle_view> arena::handles() const {
  std::vector<handle_view> out;
  for (const auto& h : map_.handle_slots()) {
    if (!h.in_use) continue;
    handle_view hv{{}, h.bytes, h.busy};
    for (const auto v : h.views) hv.views.push_back(map_.view(v).va);
    out.push_back(std::move(hv));
  }
  return out;
}

std::vector<std::pair<device_ptr, std::size_t>> arena::free_ranges() const {
  std::vector<std::pair<device_ptr, std::size_t>> out;
  for (std::size_t z = 0; z < map_.zone_count(); ++z) {
    for (const auto& r : map_.zone_at(z).free.ranges()) out.emplace_back(r);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void arena::validate() const {
  map_.validate(deferred_unmap_bytes());
  const std::size_t free = map_.free_memory().total;
  if (map_.mapped() != in_use_ + free)
    throw invariant_error(fmt::format("arena: mapped {} != in use {} + free {}", map_.mapped(), in_use_, free));
}

}  // namespace vram::detail
