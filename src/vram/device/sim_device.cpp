// The simulated device: bookkeeping of what a driver would hold, with no host memory per device byte.
// Design decisions:
//  - Address space: two disjoint regions, legacy blocks in [1 TiB, 64 TiB) and virtual memory reservations
//    in [64 TiB, 256 TiB), so the two can never overlap. Each region hands out ranges best fit and merges
//    them back on free, so addresses are reused as a driver reuses them and stay below 2^48.
//  - Legacy packing (the H200 table in docs/device.md): sizes round up to 512 bytes; a rounded size up to
//    1 MiB is a class with its own 2 MiB pages, each holding floor(2 MiB / size) blocks; a page goes back to
//    the device only when its last block is freed. Larger blocks round up to whole 2 MiB pages. Every page
//    and large block starts 2 MiB aligned, so p & ~(2 MiB - 1) finds the page of any block in one lookup.
//  - Per call O(1) for legacy calls: a hash map from page start to page, a stack of freed slots per page,
//    and per class a list of pages with room. Page records and their slot stacks are recycled, and the
//    maps draw their nodes from one pool, so a steady replay allocates no host memory per call.
//  - Virtual memory: ordered maps of reservations and mappings (O(log n) per call). A handle's bytes stay
//    used until it is released and its last mapping is gone, as CUDA frees physical memory.
//  - Streams: a point recorded on a stream completes at once unless the stream is held; synchronizing calls
//    complete what they wait for, and legacy_free completes everything, as cudaFree waits for the device.
//  - Costs: each call adds its modelled time to calls_; a call over a mapped range adds the per-handle
//    cost of every mapping it touches. A call that throws changes nothing and is not counted.
//  - Debug builds check the page a legacy call touched; validate() checks everything (O(state)).
#include "vram/device/sim_device.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <deque>
#include <map>
#include <memory_resource>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/core/range_set.hpp"
#include "vram/core/size.hpp"
#include "vram/core/slots.hpp"

namespace vram {
namespace detail {

inline constexpr std::size_t legacy_align = 512;
inline constexpr std::size_t legacy_page = 2 * MiB;
inline constexpr std::size_t legacy_small_max = 1 * MiB;
inline constexpr std::size_t legacy_classes = legacy_small_max / legacy_align;  // 2048 rounded sizes
inline constexpr std::size_t max_slots = legacy_page / legacy_align;            // 4096 blocks of 512 B
inline constexpr std::uint32_t npos32 = ~std::uint32_t{0};
inline constexpr device_ptr legacy_lo = device_ptr{1} << 40;
inline constexpr device_ptr vmm_lo = device_ptr{1} << 46;
inline constexpr device_ptr vmm_hi = device_ptr{1} << 48;

/// @brief Free address ranges of one region: best fit with alignment (the smallest range that holds the
/// block aligned, lowest address on ties), merged with neighbours when given back.
class address_ranges {
 public:
  address_ranges(device_ptr lo, device_ptr hi) { free_.insert(lo, hi - lo); }

  /// @brief A free range of @p bytes aligned to @p align, or 0 when none is left. pre: align a power of two.
  device_ptr take(std::size_t bytes, std::size_t align) { return free_.take_best_fit(bytes, align).value_or(0); }
  /// @brief Returns a range. pre: it was taken with take() and not given back since.
  void give(device_ptr base, std::size_t bytes) { free_.insert(base, bytes); }

  const range_set& free() const noexcept { return free_; }

 private:
  range_set free_;
};

/// @brief A 2 MiB page of legacy blocks of one rounded size.
struct small_page {
  device_ptr base = 0;
  std::uint32_t block = 0;          // bytes per block (a multiple of 512, at most 1 MiB)
  std::uint32_t capacity = 0;       // floor(2 MiB / block)
  std::uint32_t live = 0;           // blocks handed out and not freed
  std::uint32_t bumped = 0;         // slots [0, bumped) have been handed out at least once
  std::uint32_t room_pos = npos32;  // index in its class's list of pages with room, npos32 when full
  std::vector<std::uint32_t> freed;               // free slots below bumped (a stack)
  std::array<std::uint64_t, max_slots / 64> live_bits{};

  bool is_live(std::uint32_t slot) const noexcept { return (live_bits[slot / 64] >> (slot % 64)) & 1u; }
  void flip(std::uint32_t slot) noexcept { live_bits[slot / 64] ^= std::uint64_t{1} << (slot % 64); }
};

/// @brief What a 2 MiB-aligned legacy address starts: a small page (value = page record) or a large block
/// (value = its bytes, a multiple of 2 MiB).
struct legacy_entry {
  std::uint64_t value = 0;
  bool large = false;
};

struct reservation {
  std::size_t bytes = 0;
  std::size_t mappings = 0;  // mappings inside it
};

struct mapping {
  std::size_t bytes = 0;
  phys_handle handle = 0;
};

struct handle_state {
  std::size_t bytes = 0;
  std::uint32_t maps = 0;  // live mappings of this handle
  bool released = false;   // mem_release was called; the bytes return when maps reaches 0
};

/// @brief Work on a stream past point `after` waits for stream `on` to reach `point` (stream_wait_event).
struct stream_wait {
  std::uint64_t after = 0;
  stream_id on = 0;
  std::uint64_t point = 0;
};

struct stream_state {
  std::uint64_t submitted = 0;  // points recorded on the stream
  std::uint64_t completed = 0;  // points reached on the stream itself; == submitted unless held or lagging
  bool held = false;
  std::deque<std::pair<std::uint64_t, std::int64_t>> due;  // with a lag: points not yet reached, and when they are
  std::vector<stream_wait> waits;  // waits not yet known to be satisfied
};

struct event_state {
  stream_id stream = 0;
  std::uint64_t point = 0;
  bool recorded = false;
};

std::string hex(device_ptr p) { return fmt::format("0x{:x}", p); }

std::string size_words(std::size_t bytes) {
  if (bytes % MiB == 0) return fmt::format("{} MiB", bytes / MiB);
  if (bytes % KiB == 0) return fmt::format("{} KiB", bytes / KiB);
  return fmt::format("{} B", bytes);
}

}  // namespace detail

struct sim_device::impl {
  explicit impl(const sim_device_options& o)
      : offset(static_cast<device_ptr>(o.index) << 48),
        legacy_space(offset + detail::legacy_lo, offset + detail::vmm_lo),
        vmm_space(offset + detail::vmm_lo, offset + detail::vmm_hi),
        legacy(&pool),
        reservations(&pool),
        mappings(&pool),
        handles(&pool),
        streams(&pool),
        events(&pool),
        costs(o.costs),
        capacity(o.capacity),
        granularity(o.granularity) {}

  device_ptr offset;                            // this device's window of addresses (index << 48)
  std::pmr::unsynchronized_pool_resource pool;  // first: the containers below draw on it
  detail::address_ranges legacy_space;
  detail::address_ranges vmm_space;
  std::pmr::unordered_map<device_ptr, detail::legacy_entry> legacy;  // 2 MiB-aligned start -> page or block
  std::vector<detail::small_page> pages;
  std::vector<std::uint32_t> spare_pages;  // page records not in use
  std::array<std::vector<std::uint32_t>, detail::legacy_classes> with_room;  // by class: pages not full
  std::pmr::map<device_ptr, detail::reservation> reservations;
  std::pmr::map<device_ptr, detail::mapping> mappings;  // by start
  std::pmr::unordered_map<phys_handle, detail::handle_state> handles;
  std::pmr::unordered_map<stream_id, detail::stream_state> streams;
  std::pmr::unordered_map<event_id, detail::event_state> events;
  phys_handle next_handle = 1;
  event_id next_event = 1;
  std::size_t legacy_bytes = 0;  // small pages and large blocks
  std::size_t handle_bytes = 0;  // handles not yet released, or released but still mapped
  std::size_t peak = 0;
  cost_model costs;
  std::size_t capacity;
  std::size_t granularity;

  std::size_t used() const noexcept { return legacy_bytes + handle_bytes; }
  bool fits(std::size_t bytes) const noexcept { return bytes <= capacity - used(); }
  void grew() noexcept { peak = std::max(peak, used()); }
  /// @brief Completes the work queued on every stream, held or not (cudaFree waits for the whole device).
  void complete_all() noexcept {
    for (auto& [id, st] : streams) {
      st.completed = st.submitted;
      st.due.clear();
    }
  }
  /// @brief With a lag, completes the points of streams not held whose time has come (the device's time @p now).
  void catch_up(std::int64_t now) noexcept {
    for (auto& [id, st] : streams) {
      if (st.held) continue;
      while (!st.due.empty() && st.due.front().second <= now) {
        st.completed = std::max(st.completed, st.due.front().first);
        st.due.pop_front();
      }
    }
  }

  /// @brief Whether @p point of stream @p s is complete: reached there, and every wait before it satisfied.
  bool reached(stream_id s, std::uint64_t point, int depth = 0) const {
    const auto it = streams.find(s);
    if (it == streams.end()) return point == 0;
    if (it->second.completed < point) return false;
    if (depth > 64) return true;  // waits form no cycle (a stream waits only for points already recorded)
    for (const auto& w : it->second.waits)
      if (w.after < point && !reached(w.on, w.point, depth + 1)) return false;
    return true;
  }
  /// @brief Completes @p s up to @p point, and the work it waits for.
  void finish(stream_id s, std::uint64_t point, int depth = 0) {
    const auto it = streams.find(s);
    if (it == streams.end()) return;
    it->second.completed = std::max(it->second.completed, point);
    auto& due = it->second.due;
    while (!due.empty() && due.front().first <= it->second.completed) due.pop_front();
    if (depth > 64) return;
    const auto waits = it->second.waits;
    for (const auto& w : waits)
      if (w.after < point) finish(w.on, w.point, depth + 1);
  }

  device_ptr small_malloc(std::size_t rounded);
  void small_free(device_ptr p, detail::small_page& page, device_call_stats& calls);
  void check_page(const detail::small_page& page) const;

  using mapping_map = std::pmr::map<device_ptr, detail::mapping>;
  struct mapped_range {
    mapping_map::iterator first, last;
    detail::reservation* reservation;
  };
  mapped_range whole_mappings(std::string_view call, device_ptr va, std::size_t bytes);
  detail::reservation& reservation_of(std::string_view call, device_ptr va, std::size_t bytes);
  detail::event_state& event(std::string_view call, event_id e);
  void validate() const;
};

// ---- legacy blocks -------------------------------------------------------------------------------------

device_ptr sim_device::impl::small_malloc(std::size_t rounded) {
  auto& room = with_room[rounded / detail::legacy_align - 1];
  if (room.empty()) {
    if (!fits(detail::legacy_page)) return 0;
    const device_ptr base = legacy_space.take(detail::legacy_page, detail::legacy_page);
    if (base == 0) return 0;
    const std::uint32_t idx = detail::take_slot(pages, spare_pages);
    auto& page = pages[idx];
    page.base = base;
    page.block = static_cast<std::uint32_t>(rounded);
    page.capacity = static_cast<std::uint32_t>(detail::legacy_page / rounded);
    page.live = 0;
    page.bumped = 0;
    page.freed.clear();
    page.live_bits.fill(0);
    page.room_pos = static_cast<std::uint32_t>(room.size());
    room.push_back(idx);
    legacy.emplace(base, detail::legacy_entry{idx, false});
    legacy_bytes += detail::legacy_page;
    grew();
  }
  auto& page = pages[room.back()];
  std::uint32_t slot;
  if (!page.freed.empty()) {
    slot = page.freed.back();
    page.freed.pop_back();
  } else {
    slot = page.bumped++;
  }
  page.flip(slot);
  page.live += 1;
  if (page.live == page.capacity) {  // full: it was the back of the list
    room.pop_back();
    page.room_pos = detail::npos32;
  }
#if VRAM_DEBUG_VALIDATE
  check_page(page);
#endif
  return page.base + std::size_t{slot} * page.block;
}

void sim_device::impl::small_free(device_ptr p, detail::small_page& page, device_call_stats& calls) {
  const std::size_t offset = p - page.base;
  const auto slot = static_cast<std::uint32_t>(offset / page.block);
  if (offset % page.block != 0 || slot >= page.bumped || !page.is_live(slot)) {
    throw device_error(fmt::format(
        "legacy_free({}): not a live block (the page at {} holds blocks of {} bytes; {})", detail::hex(p),
        detail::hex(page.base), page.block,
        offset % page.block != 0 ? "the address is inside a block" : "that block is already free"));
  }
  calls.add(device_call::legacy_free, costs.cost(device_call::legacy_free, page.block));
  page.flip(slot);
  page.live -= 1;
  auto& room = with_room[page.block / detail::legacy_align - 1];
  if (page.live == 0) {  // the page goes back to the device
    if (page.room_pos != detail::npos32) {
      const std::uint32_t moved = room.back();
      room[page.room_pos] = moved;
      pages[moved].room_pos = page.room_pos;
      room.pop_back();
    }
    const auto idx = static_cast<std::uint32_t>(&page - pages.data());
    legacy.erase(page.base);
    legacy_space.give(page.base, detail::legacy_page);
    legacy_bytes -= detail::legacy_page;
    page.room_pos = detail::npos32;
    page.capacity = 0;
    spare_pages.push_back(idx);
    return;
  }
  page.freed.push_back(slot);
  if (page.room_pos == detail::npos32) {
    page.room_pos = static_cast<std::uint32_t>(room.size());
    room.push_back(static_cast<std::uint32_t>(&page - pages.data()));
  }
#if VRAM_DEBUG_VALIDATE
  check_page(page);
#endif
}

void sim_device::impl::check_page(const detail::small_page& page) const {
  if (page.live > page.capacity || page.bumped > page.capacity) {
    throw invariant_error(fmt::format("sim_device: page {} holds {} live of {} blocks, {} ever used",
                                      detail::hex(page.base), page.live, page.capacity, page.bumped));
  }
  if (page.freed.size() + page.live != page.bumped) {
    throw invariant_error(fmt::format("sim_device: page {}: {} free slots + {} live != {} slots used",
                                      detail::hex(page.base), page.freed.size(), page.live, page.bumped));
  }
  if ((page.room_pos == detail::npos32) != (page.live == page.capacity)) {
    throw invariant_error(fmt::format("sim_device: page {} ({} of {} live) is {} the list of pages with room",
                                      detail::hex(page.base), page.live, page.capacity,
                                      page.room_pos == detail::npos32 ? "missing from" : "wrongly in"));
  }
}

// ---- virtual memory helpers ----------------------------------------------------------------------------

detail::reservation& sim_device::impl::reservation_of(std::string_view call, device_ptr va, std::size_t bytes) {
  auto r = reservations.upper_bound(va);
  if (r != reservations.begin()) {
    --r;
    if (va >= r->first && bytes <= r->second.bytes && va - r->first <= r->second.bytes - bytes) return r->second;
  }
  throw device_error(fmt::format("{}(va={}, bytes={}): the range [{}, {}) is not inside one reservation", call,
                                 detail::hex(va), bytes, detail::hex(va), detail::hex(va + bytes)));
}

sim_device::impl::mapped_range sim_device::impl::whole_mappings(std::string_view call, device_ptr va,
                                                                std::size_t bytes) {
  if (bytes == 0) throw device_error(fmt::format("{}(va={}, bytes=0): empty range", call, detail::hex(va)));
  auto& r = reservation_of(call, va, bytes);
  const device_ptr end = va + bytes;
  auto first = mappings.lower_bound(va);
  auto it = first;
  for (device_ptr cursor = va; cursor < end; cursor += it->second.bytes, ++it) {
    if (it == mappings.end() || it->first != cursor) {
      // Either a mapping starts before cursor and covers it (only possible at va), or nothing is mapped there.
      auto before = mappings.upper_bound(cursor);
      const bool straddles = before != mappings.begin() && cursor == va &&
                             std::prev(before)->first + std::prev(before)->second.bytes > cursor;
      throw device_error(fmt::format(
          "{}(va={}, bytes={}): {} at {}; the range must consist of whole mappings", call, detail::hex(va), bytes,
          straddles ? "a mapping starts before the range and covers" : "nothing is mapped", detail::hex(cursor)));
    }
    if (it->second.bytes > end - cursor) {
      throw device_error(fmt::format(
          "{}(va={}, bytes={}): the mapping [{}, {}) runs past the end {}; the range must consist of whole "
          "mappings", call, detail::hex(va), bytes, detail::hex(it->first), detail::hex(it->first + it->second.bytes),
          detail::hex(end)));
    }
  }
  return {first, it, &r};
}

detail::event_state& sim_device::impl::event(std::string_view call, event_id e) {
  auto it = events.find(e);
  if (it == events.end()) throw device_error(fmt::format("{}(event={}): no such event", call, e));
  return it->second;
}

// ---- validation ----------------------------------------------------------------------------------------

namespace detail {

[[noreturn]] void broken(const std::string& what) { throw invariant_error("sim_device: " + what); }

// The free ranges are ordered, merged, inside [lo, hi), indexed by size; returns their total.
std::size_t check_ranges(const address_ranges& space, std::string_view name, device_ptr lo, device_ptr hi) {
  try {
    space.free().validate();
  } catch (const invariant_error& e) {
    broken(fmt::format("{} free ranges: {}", name, e.what()));
  }
  for (const auto& [base, bytes] : space.free().ranges()) {
    if (base < lo || base > hi || bytes > hi - base) {
      broken(fmt::format("{} free range [{}, +{}) is outside the region", name, hex(base), bytes));
    }
  }
  return space.free().total();
}

}  // namespace detail

void sim_device::impl::validate() const {
  using detail::broken;
  using detail::hex;
  // Legacy pages and blocks.
  std::size_t bytes = 0, small_pages = 0;
  for (const auto& [base, entry] : legacy) {
    if (base % detail::legacy_page != 0) broken(fmt::format("legacy entry at {} is not 2 MiB aligned", hex(base)));
    if (entry.large) {
      if (entry.value % detail::legacy_page != 0 || entry.value < detail::legacy_page) {
        broken(fmt::format("large block at {} has {} bytes, not whole 2 MiB pages", hex(base), entry.value));
      }
      bytes += entry.value;
      continue;
    }
    const auto& page = pages.at(entry.value);
    if (page.base != base || page.capacity == 0) broken(fmt::format("page record of {} is stale", hex(base)));
    check_page(page);
    std::uint32_t live = 0;
    for (auto word : page.live_bits) live += static_cast<std::uint32_t>(std::popcount(word));
    if (live != page.live || live == 0) {
      broken(fmt::format("page {} counts {} live blocks, its bits {} (an empty page must be given back)", hex(base),
                         page.live, live));
    }
    for (auto slot : page.freed) {
      if (slot >= page.bumped || page.is_live(slot)) broken(fmt::format("page {}: free slot {} is live", hex(base), slot));
    }
    bytes += detail::legacy_page;
    small_pages += 1;
  }
  if (bytes != legacy_bytes) broken(fmt::format("legacy bytes {} != pages and blocks {}", legacy_bytes, bytes));
  if (small_pages + spare_pages.size() != pages.size()) broken("page records lost or doubly used");
  for (std::size_t c = 0; c < with_room.size(); ++c) {
    for (std::size_t i = 0; i < with_room[c].size(); ++i) {
      const auto& page = pages[with_room[c][i]];
      if (page.room_pos != i || page.block != (c + 1) * detail::legacy_align || page.live >= page.capacity) {
        broken(fmt::format("list of pages with room for {} bytes holds page {} wrongly", (c + 1) * 512, hex(page.base)));
      }
    }
  }
  if (detail::check_ranges(legacy_space, "legacy", offset + detail::legacy_lo, offset + detail::vmm_lo) + legacy_bytes !=
      detail::vmm_lo - detail::legacy_lo) {
    broken("legacy address space: free ranges + blocks != the region");
  }
  // Reservations, mappings, handles.
  std::size_t reserved = 0;
  device_ptr end = 0;
  for (const auto& [va, r] : reservations) {
    if (va < end) broken(fmt::format("reservation at {} overlaps the one before", hex(va)));
    end = va + r.bytes;
    reserved += r.bytes;
  }
  if (detail::check_ranges(vmm_space, "virtual", offset + detail::vmm_lo, offset + detail::vmm_hi) + reserved !=
      detail::vmm_hi - detail::vmm_lo) {
    broken("virtual address space: free ranges + reservations != the region");
  }
  std::unordered_map<device_ptr, std::size_t> per_reservation;
  std::unordered_map<phys_handle, std::uint32_t> per_handle;
  end = 0;
  for (const auto& [va, m] : mappings) {
    if (va < end) broken(fmt::format("mapping at {} overlaps the one before", hex(va)));
    end = va + m.bytes;
    auto r = reservations.upper_bound(va);
    if (r == reservations.begin() || std::prev(r)->first + std::prev(r)->second.bytes < end) {
      broken(fmt::format("mapping [{}, {}) is not inside a reservation", hex(va), hex(end)));
    }
    per_reservation[std::prev(r)->first] += 1;
    auto h = handles.find(m.handle);
    if (h == handles.end() || h->second.bytes != m.bytes) {
      broken(fmt::format("mapping at {} names handle {}, missing or of another size", hex(va), m.handle));
    }
    per_handle[m.handle] += 1;
  }
  for (const auto& [va, r] : reservations) {
    if (r.mappings != per_reservation[va]) broken(fmt::format("reservation {} miscounts its mappings", hex(va)));
  }
  std::size_t held = 0;
  for (const auto& [h, state] : handles) {
    if (state.maps != per_handle[h]) broken(fmt::format("handle {} counts {} mappings, found {}", h, state.maps, per_handle[h]));
    if (state.released && state.maps == 0) broken(fmt::format("handle {} released and unmapped but kept", h));
    held += state.bytes;
  }
  if (held != handle_bytes) broken(fmt::format("handle bytes {} != sum of handles {}", handle_bytes, held));
  if (used() > capacity || peak < used()) broken(fmt::format("used {} exceeds capacity {} or peak {}", used(), capacity, peak));
  // Streams and events.
  for (const auto& [s, st] : streams) {
    const bool lagging = !st.due.empty() && st.due.back().first == st.submitted;
    if (st.completed > st.submitted || (!st.held && !lagging && st.completed != st.submitted)) {
      broken(fmt::format("stream {} completed {} of {} points (held: {})", s, st.completed, st.submitted, st.held));
    }
  }
  for (const auto& [e, ev] : events) {
    if (!ev.recorded) continue;
    auto st = streams.find(ev.stream);
    if (st == streams.end() || ev.point > st->second.submitted) broken(fmt::format("event {} marks a point never recorded", e));
  }
}

// ---- sim_device ----------------------------------------------------------------------------------------

sim_device::sim_device(sim_device_options options) : options_(std::move(options)) {
  if (options_.capacity == 0) throw usage_error("sim_device: capacity must be > 0");
  if (!std::has_single_bit(options_.granularity) || options_.granularity < detail::legacy_align) {
    throw usage_error(fmt::format("sim_device: granularity {} must be a power of two of at least 512 bytes",
                                  options_.granularity));
  }
  static_assert(max_capacity == detail::vmm_lo - detail::legacy_lo);
  if (options_.capacity > max_capacity) {
    throw usage_error(fmt::format("a simulated device holds at most {}: {} is more", format_bytes(max_capacity),
                                  format_bytes(options_.capacity)));
  }
  impl_ = std::make_unique<impl>(options_);
}

sim_device::~sim_device() = default;

std::string sim_device::name() const {
  return fmt::format("{} ({} MiB, {} granules)", options_.label, options_.capacity / MiB,
                     detail::size_words(options_.granularity));
}

memory_info sim_device::mem_info() {
  std::lock_guard lock(mutex_);
  calls_.add(device_call::mem_get_info, impl_->costs.cost(device_call::mem_get_info, 0));
  return {impl_->capacity - impl_->used(), impl_->capacity};
}

device_ptr sim_device::legacy_malloc(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  auto& d = *impl_;
  calls_.add(device_call::legacy_malloc, d.costs.cost(device_call::legacy_malloc, bytes));
  if (bytes == 0 || bytes > d.capacity) return 0;
  const std::size_t rounded = round_up(bytes, detail::legacy_align);
  if (rounded <= detail::legacy_small_max) return d.small_malloc(rounded);
  const std::size_t whole = round_up(rounded, detail::legacy_page);
  if (!d.fits(whole)) return 0;
  const device_ptr base = d.legacy_space.take(whole, detail::legacy_page);
  if (base == 0) return 0;
  d.legacy.emplace(base, detail::legacy_entry{whole, true});
  d.legacy_bytes += whole;
  d.grew();
  return base;
}

void sim_device::legacy_free(device_ptr p) {
  std::lock_guard lock(mutex_);
  auto& d = *impl_;
  const device_ptr base = p & ~device_ptr{detail::legacy_page - 1};
  auto it = d.legacy.find(base);
  if (it == d.legacy.end()) {
    throw device_error(fmt::format("legacy_free({}): not a block from legacy_malloc (nothing allocated in the "
                                   "2 MiB page at {})", detail::hex(p), detail::hex(base)));
  }
  if (!it->second.large) {
    d.small_free(p, d.pages[it->second.value], calls_);
    d.complete_all();
    return;
  }
  const std::size_t whole = it->second.value;
  if (p != base) {
    throw device_error(fmt::format("legacy_free({}): inside the block of {} bytes at {}, not its start",
                                   detail::hex(p), whole, detail::hex(base)));
  }
  calls_.add(device_call::legacy_free, d.costs.cost(device_call::legacy_free, whole));
  d.legacy.erase(it);
  d.legacy_space.give(base, whole);
  d.legacy_bytes -= whole;
  d.complete_all();
}

device_ptr sim_device::address_reserve(std::size_t bytes, std::size_t alignment) {
  std::lock_guard lock(mutex_);
  auto& d = *impl_;
  if (bytes == 0 || bytes % d.granularity != 0) {
    throw device_error(fmt::format("address_reserve(bytes={}, alignment={}): bytes must be a positive multiple "
                                   "of the granularity {}", bytes, alignment, d.granularity));
  }
  if (alignment != 0 && !std::has_single_bit(alignment)) {
    throw device_error(fmt::format("address_reserve(bytes={}, alignment={}): alignment must be 0 or a power of two",
                                   bytes, alignment));
  }
  const device_ptr va = d.vmm_space.take(bytes, std::max(alignment, d.granularity));
  if (va == 0) {
    throw device_error(fmt::format("address_reserve(bytes={}, alignment={}): out of virtual address space",
                                   bytes, alignment));
  }
  d.reservations.emplace(va, detail::reservation{bytes, 0});
  calls_.add(device_call::address_reserve, d.costs.cost(device_call::address_reserve, bytes));
  return va;
}

void sim_device::address_free(device_ptr va, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  auto& d = *impl_;
  auto it = d.reservations.find(va);
  if (it == d.reservations.end() || it->second.bytes != bytes) {
    throw device_error(fmt::format(
        "address_free(va={}, bytes={}): {}", detail::hex(va), bytes,
        it == d.reservations.end() ? std::string("no reservation starts there")
                                   : fmt::format("the reservation there is {} bytes; free it whole", it->second.bytes)));
  }
  if (it->second.mappings != 0) {
    throw device_error(fmt::format("address_free(va={}, bytes={}): {} mappings are still inside; unmap them first",
                                   detail::hex(va), bytes, it->second.mappings));
  }
  d.vmm_space.give(va, bytes);
  d.reservations.erase(it);
  calls_.add(device_call::address_free, d.costs.cost(device_call::address_free, bytes));
}

phys_handle sim_device::mem_create(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  auto& d = *impl_;
  if (bytes == 0 || bytes % d.granularity != 0) {
    throw device_error(fmt::format("mem_create(bytes={}): bytes must be a positive multiple of the granularity {}",
                                   bytes, d.granularity));
  }
  calls_.add(device_call::mem_create, d.costs.cost(device_call::mem_create, bytes));
  if (!d.fits(bytes)) return 0;
  const phys_handle h = d.next_handle++;
  d.handles.emplace(h, detail::handle_state{bytes, 0, false});
  d.handle_bytes += bytes;
  d.grew();
  return h;
}

void sim_device::mem_release(phys_handle h) {
  std::lock_guard lock(mutex_);
  auto& d = *impl_;
  auto it = d.handles.find(h);
  if (it == d.handles.end() || it->second.released) {
    throw device_error(fmt::format("mem_release(handle={}): {}", h,
                                   it == d.handles.end() ? "no such handle" : "already released"));
  }
  calls_.add(device_call::mem_release, d.costs.cost(device_call::mem_release, it->second.bytes));
  if (it->second.maps != 0) {
    it->second.released = true;  // its memory returns with the last unmap
    return;
  }
  d.handle_bytes -= it->second.bytes;
  d.handles.erase(it);
}

void sim_device::mem_map(device_ptr va, std::size_t bytes, phys_handle h) {
  std::lock_guard lock(mutex_);
  auto& d = *impl_;
  auto hit = d.handles.find(h);
  if (hit == d.handles.end() || hit->second.released) {
    throw device_error(fmt::format("mem_map(va={}, bytes={}, handle={}): {}", detail::hex(va), bytes, h,
                                   hit == d.handles.end() ? "no such handle" : "the handle was released"));
  }
  if (bytes != hit->second.bytes) {
    throw device_error(fmt::format("mem_map(va={}, bytes={}, handle={}): the handle holds {} bytes and is mapped "
                                   "whole", detail::hex(va), bytes, h, hit->second.bytes));
  }
  if (va % d.granularity != 0) {
    throw device_error(fmt::format("mem_map(va={}, bytes={}, handle={}): va is not a multiple of the granularity {}",
                                   detail::hex(va), bytes, h, d.granularity));
  }
  auto& r = d.reservation_of("mem_map", va, bytes);
  auto next = d.mappings.lower_bound(va + bytes);
  if (next != d.mappings.begin()) {
    const auto prev = std::prev(next);
    if (prev->first + prev->second.bytes > va) {
      throw device_error(fmt::format("mem_map(va={}, bytes={}, handle={}): overlaps the mapping [{}, {}) of "
                                     "handle {}", detail::hex(va), bytes, h, detail::hex(prev->first),
                                     detail::hex(prev->first + prev->second.bytes), prev->second.handle));
    }
  }
  d.mappings.emplace_hint(next, va, detail::mapping{bytes, h});
  r.mappings += 1;
  hit->second.maps += 1;
  calls_.add(device_call::mem_map, d.costs.cost(device_call::mem_map, bytes));
}

void sim_device::mem_unmap(device_ptr va, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  auto& d = *impl_;
  const auto range = d.whole_mappings("mem_unmap", va, bytes);
  std::uint64_t ns = 0;  // one call; its cost follows the handles it unmaps
  for (auto it = range.first; it != range.last; ++it) {
    ns += d.costs.cost(device_call::mem_unmap, it->second.bytes);
    auto h = d.handles.find(it->second.handle);
    h->second.maps -= 1;
    if (h->second.released && h->second.maps == 0) {
      d.handle_bytes -= h->second.bytes;
      d.handles.erase(h);
    }
    range.reservation->mappings -= 1;
  }
  d.mappings.erase(range.first, range.last);
  calls_.add(device_call::mem_unmap, ns);
}

void sim_device::set_access(device_ptr va, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  auto& d = *impl_;
  const auto range = d.whole_mappings("set_access", va, bytes);
  std::uint64_t ns = 0;
  for (auto it = range.first; it != range.last; ++it) ns += d.costs.cost(device_call::set_access, it->second.bytes);
  calls_.add(device_call::set_access, ns);
}

event_id sim_device::event_create() {
  std::lock_guard lock(mutex_);
  const event_id e = impl_->next_event++;
  impl_->events.emplace(e, detail::event_state{});
  return e;
}

void sim_device::event_destroy(event_id e) {
  std::lock_guard lock(mutex_);
  impl_->event("event_destroy", e);
  impl_->events.erase(e);
}

void sim_device::event_record(event_id e, stream_id s) {
  std::lock_guard lock(mutex_);
  auto& ev = impl_->event("event_record", e);
  auto& st = impl_->streams[s];
  st.submitted += 1;
  if (!st.held) {
    if (options_.lag_ns > 0)
      st.due.emplace_back(st.submitted, now_ns() + options_.lag_ns);
    else
      st.completed = st.submitted;
  }
  ev = {s, st.submitted, true};
  calls_.add(device_call::event_record, impl_->costs.cost(device_call::event_record, 0));
}

bool sim_device::event_query(event_id e) {
  std::lock_guard lock(mutex_);
  const auto& ev = impl_->event("event_query", e);
  calls_.add(device_call::event_query, impl_->costs.cost(device_call::event_query, 0));
  if (options_.lag_ns > 0) impl_->catch_up(now_ns());
  return !ev.recorded || impl_->reached(ev.stream, ev.point);
}

void sim_device::stream_wait_event(stream_id s, event_id e) {
  std::lock_guard lock(mutex_);
  const auto& ev = impl_->event("stream_wait_event", e);
  calls_.add(device_call::stream_wait_event, impl_->costs.cost(device_call::stream_wait_event, 0));
  if (options_.lag_ns > 0) impl_->catch_up(now_ns());
  auto& waits = impl_->streams[s].waits;
  std::erase_if(waits, [&](const detail::stream_wait& w) { return impl_->reached(w.on, w.point); });
  if (ev.recorded && !impl_->reached(ev.stream, ev.point))
    waits.push_back({impl_->streams[s].submitted, ev.stream, ev.point});
}

void sim_device::event_synchronize(event_id e) {
  std::lock_guard lock(mutex_);
  const auto& ev = impl_->event("event_synchronize", e);
  calls_.add(device_call::event_synchronize, impl_->costs.cost(device_call::event_synchronize, 0));
  if (ev.recorded) impl_->finish(ev.stream, ev.point);
}

void sim_device::stream_synchronize(stream_id s) {
  std::lock_guard lock(mutex_);
  impl_->finish(s, impl_->streams[s].submitted);
  calls_.add(device_call::stream_synchronize, impl_->costs.cost(device_call::stream_synchronize, 0));
}

void sim_device::device_synchronize() {
  std::lock_guard lock(mutex_);
  impl_->complete_all();
  calls_.add(device_call::device_synchronize, impl_->costs.cost(device_call::device_synchronize, 0));
}

void sim_device::hold(stream_id s) {
  std::lock_guard lock(mutex_);
  impl_->streams[s].held = true;
}

void sim_device::release(stream_id s) {
  std::lock_guard lock(mutex_);
  auto& st = impl_->streams[s];
  st.completed = st.submitted;
  st.due.clear();
  st.held = false;
}

std::size_t sim_device::used_bytes() const {
  std::lock_guard lock(mutex_);
  return impl_->used();
}

std::size_t sim_device::peak_used_bytes() const {
  std::lock_guard lock(mutex_);
  return impl_->peak;
}

std::vector<device_region> sim_device::regions() const {
  std::lock_guard lock(mutex_);
  std::vector<device_region> out;
  out.reserve(impl_->legacy.size() + impl_->mappings.size());
  for (const auto& [base, entry] : impl_->legacy) {
    if (entry.large)
      out.push_back({base, static_cast<std::size_t>(entry.value), device_region::kind::legacy_block, 0});
    else
      out.push_back({base, detail::legacy_page, device_region::kind::legacy_page, 0});
  }
  for (const auto& [va, m] : impl_->mappings) out.push_back({va, m.bytes, device_region::kind::mapping, m.handle});
  std::sort(out.begin(), out.end(), [](const device_region& a, const device_region& b) { return a.va < b.va; });
  return out;
}

void sim_device::validate() const {
  std::lock_guard lock(mutex_);
  impl_->validate();
}

}  // namespace vram
