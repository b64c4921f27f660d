// vram's pool: the hot path through thread caches and the block table, the slow path under the lock
// (arena, stream-ordered release, recovery when memory runs out), statistics and snapshot.
#include "vram/pool/pool_resource.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/device.hpp"

namespace vram {

namespace {

std::atomic<std::uint64_t> next_pool_id{1};

detail::arena_options arena_settings(const pool_options& o) {
  detail::arena_options a;
  a.max_cached_ratio = o.max_cached_ratio;
  a.max_handle_bytes = o.max_handle_bytes;
  a.small_handle_bytes = o.small_handle_bytes;
  a.block_handles = o.block_handles;
  a.burst_bytes = o.burst_bytes;
  a.burst_window_ns = static_cast<std::int64_t>(o.burst_window_ms * 1e6);
  a.spare_slack_bytes = o.spare_slack_bytes;
  a.holes_below_peak = o.holes_below_peak;
  a.aliasing = o.aliasing;
  a.reserve_ratio = o.reserve_ratio;
  a.limit = o.limit;
  a.zones = 3;
  return a;
}

std::size_t zone_for(std::size_t rounded) {
  return rounded <= pool_resource::tiny_max ? 0 : rounded <= pool_resource::small_max ? 1 : 2;
}

}  // namespace

/// A thread's caches, one per pool it has used; on thread exit each goes back to its pool, if alive.
struct pool_thread_state {
  struct entry {
    std::uint64_t pool_id;
    detail::thread_cache* cache;
    std::weak_ptr<int> alive;
    pool_resource* pool;
  };
  std::vector<entry> entries;

  ~pool_thread_state() {
    for (auto& e : entries) {
      const auto alive = e.alive.lock();
      if (!alive) continue;
      std::lock_guard lock(e.pool->mutex_);
      std::vector<detail::cache_entry> out;
      e.cache->drain(out);  // the owner, outside the hot path
      for (const auto& c : out) e.pool->release_locked(c.ptr, c.size, c.stream);
      e.pool->idle_caches_.push_back(e.cache);
      e.pool->sync_mirrors_locked();
    }
  }
};

namespace {
thread_local pool_thread_state thread_state;

// The hot path's view of the thread's last-used cache: trivially destructible, so reading it costs no
// initialization check. It keeps the default TLS model: an initial-exec variable would put the library's
// whole TLS block in glibc's small static surplus, and libvram.so could then not be loaded with dlopen.
// The build uses TLS descriptors (-mtls-dialect=gnu2 on x86-64), so reading it from libvram.so costs an
// indirect call that returns an offset, not a call of __tls_get_addr.
struct last_cache {
  std::uint64_t pool_id;
  detail::thread_cache* cache;
};
constinit thread_local last_cache last = {0, nullptr};
}  // namespace

pool_resource::pool_resource(device& dev, pool_options options)
    : memory_resource(dev),
      options_(options),
      id_(next_pool_id.fetch_add(1)),
      asymmetric_(options.membarrier && detail::asymmetric_fences()),
      arena_(dev, arena_settings(options)),
      alive_(std::make_shared<int>(0)) {
  // Blocks freed without an event (one stream so far) may still be used by work queued on their stream, and
  // unmapping does not wait for the device: the arena unmaps such memory once a fence over it completes.
  arena_.set_unmap_fence({[this] { return fence_locked(); },
                          [this](std::uint64_t id, bool wait) { return fence_done_locked(id, wait); }});
}

pool_resource::~pool_resource() {
  alive_.reset();
  arena_.settle_unmaps(true);  // while the fences' events exist
  for (auto& f : fences_)
    for (auto e : f.events) device_->event_destroy(e);
  for (auto e : first_streams_) device_->event_destroy(e);
  for (auto& f : pending_)
    for (auto e : f.events) device_->event_destroy(e);
  for (auto e : spare_events_) device_->event_destroy(e);
}

inline detail::thread_cache* pool_resource::my_cache() {
  if (last.pool_id == id_) [[likely]] return last.cache;
  return my_cache_slow();
}

detail::thread_cache* pool_resource::my_cache_slow() {
  auto& t = thread_state;
  for (auto& e : t.entries) {
    if (e.pool_id == id_) {
      last = {id_, e.cache};
      return e.cache;
    }
  }
  std::erase_if(t.entries, [](const pool_thread_state::entry& e) { return e.alive.expired(); });
  detail::thread_cache* c = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (!idle_caches_.empty()) {
      c = idle_caches_.back();
      idle_caches_.pop_back();
    } else if (caches_.size() < max_caches) {
      caches_.push_back(std::make_unique<detail::thread_cache>(options_.thread_cache_bytes));
      c = caches_.back().get();
      cache_slots_[caches_.size() - 1].store(c, std::memory_order_release);
      cache_count_.store(caches_.size(), std::memory_order_release);
    }
  }
  if (c == nullptr) return nullptr;
  t.entries.push_back({id_, c, alive_, this});
  last = {id_, c};
  return c;
}

detail::thread_cache* pool_resource::my_cache_if_any() const noexcept {
  if (last.pool_id == id_) return last.cache;
  for (const auto& e : thread_state.entries)
    if (e.pool_id == id_) return e.cache;
  return nullptr;
}

device_ptr pool_resource::do_allocate(std::size_t bytes, stream_id stream) {
  const std::size_t rounded = round_up(bytes, 512);
  detail::thread_cache* c = options_.thread_cache ? my_cache() : nullptr;
  if (c != nullptr && c->enter(stop_, asymmetric_)) {
    detail::block_table::slot* slot = nullptr;
    const device_ptr p = c->pop(rounded, stream, slot);
    if (p != 0) {
      detail::block_table::mark_live(slot, p);
      c->allocations.store(c->allocations.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      c->requested.store(c->requested.load(std::memory_order_relaxed) + static_cast<std::int64_t>(bytes),
                         std::memory_order_relaxed);
      c->leave();
      return p;
    }
    c->leave();
  }
  std::lock_guard lock(mutex_);
  note_stream_locked(stream);
  // The caller's own large blocks go back first, so that best fit sees them. Other threads' caches are taken
  // back only when mapped memory cannot serve the request (allocate_locked): taking them at every large miss
  // made each miss empty the others' caches, whose next requests missed in turn, a cascade of stops that
  // kept 16 threads allocating 1 MiB blocks off the CPU most of the time.
  if (rounded > small_max) flush_caches_locked(/*large_only=*/true, /*others=*/false);
  const device_ptr p = allocate_locked(rounded, stream);
  if (p == 0) {
    ++stats_.failed_allocations;
    sync_mirrors_locked();  // a failed growth may still have recycled or released handles
    return 0;
  }
  if (table_.full()) {
    with_threads_stopped_locked([&] {
      table_.grow();
      for (auto& cache : caches_) cache->rebind([&](device_ptr q) { return table_.find(q); });
    });
  }
  table_.insert_live(p, rounded);
  ++stats_.allocations;
  stats_.requested_bytes += bytes;
  sync_mirrors_locked();
#if VRAM_DEBUG_VALIDATE
  if (stats_.allocations % 4096 == 0) arena_.validate();
#endif
  return p;
}

device_ptr pool_resource::allocate_locked(std::size_t rounded, stream_id stream) {
  // A request the device (or the limit) cannot hold beside the blocks in use fails at once. Trying would make
  // handles of whatever memory is free, one granule each as the room runs out, only to give them back: a
  // 1 TiB request on a 141 GiB device made 72,000 handles before it failed.
  const std::size_t capacity = arena_.capacity();
  if (rounded > capacity || rounded > capacity - std::min(capacity, live_bytes_locked())) return 0;
  const std::size_t zone = zone_for(rounded);
  if (!pending_.empty()) {
    // A block freed on this very stream may be reused at once; the others once their events complete.
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (it->stream == stream && it->size == rounded && it->events.size() == 1) {
        const device_ptr p = it->ptr;
        spare_events_.push_back(it->events.front());
        pending_bytes_ -= it->size;
        pending_.erase(it);
        return p;
      }
    }
    process_pending_locked(false);
  }
  device_ptr p = arena_.allocate_mapped(rounded, 512, zone);
  if (p == 0) {
    // Blocks kept by threads may fit before anything is mapped. Taking them back stops every thread, and
    // when one take-back follows another within the window, the threads are passing too few blocks around
    // (16 threads cycling one block each in a pool of 14 stopped the hot path thousands of times a second):
    // growth under the reserve bound gives them their own, once.
    const std::int64_t now = device_->now_ns();
    if (now - last_take_back_ns_ < take_back_window_ns && others_cache_locked() &&
        static_cast<double>(arena_.reserved() + rounded) <=
            options_.reserve_ratio * static_cast<double>(stats_.peak_allocated_bytes)) {
      p = arena_.allocate(rounded, 512, zone);
      if (p != 0) ++stats_.take_back_growths;
    }
    if (p == 0) {
      if (flush_caches_locked()) last_take_back_ns_ = now;
      p = arena_.allocate_mapped(rounded, 512, zone);
    }
  }
  if (p == 0) p = arena_.allocate(rounded, 512, zone);
  if (p == 0 && !pending_.empty()) {
    process_pending_locked(true);  // wait for the stream work that holds freed blocks, then retry
    p = arena_.allocate(rounded, 512, zone);
  }
  return p;
}

void pool_resource::do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) {
  const std::size_t rounded = round_up(bytes, 512);
  detail::block_state found = detail::block_state::empty;
  std::size_t held = 0;
  detail::thread_cache* c = options_.thread_cache ? my_cache() : nullptr;
  std::unique_lock lock(mutex_, std::defer_lock);
  if (c != nullptr && c->enter(stop_, asymmetric_)) {
    detail::block_table::slot* slot = nullptr;
    if (!table_.free_live(p, rounded, found, held, slot)) {
      c->leave();
      bad_free(p, bytes, found, held);
    }
    // Blocks named by record_stream() take the slow path, which holds them for those streams' work.
    if (recorded_count_.load(std::memory_order_acquire) == 0 && c->push(p, rounded, stream, slot)) {
      c->frees.store(c->frees.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      c->requested.store(c->requested.load(std::memory_order_relaxed) - static_cast<std::int64_t>(bytes),
                         std::memory_order_relaxed);
      c->leave();
      return;
    }
    c->leave();
    lock.lock();
  } else {
    lock.lock();
    if (!table_.free_live(p, rounded, found, held)) bad_free(p, bytes, found, held);
  }
  // The block is now `cached` and belongs to this call: give it back under the lock.
  std::vector<stream_id> extra;
  if (auto it = recorded_.find(p); it != recorded_.end()) {
    extra = std::move(it->second);
    recorded_.erase(it);
    recorded_count_.store(recorded_.size(), std::memory_order_release);
  }
  release_locked(p, rounded, stream, std::move(extra));
  ++stats_.frees;
  stats_.requested_bytes -= bytes;
  sync_mirrors_locked();
}

void pool_resource::bad_free(device_ptr p, std::size_t bytes, detail::block_state found, std::size_t size) const {
  using detail::block_state;
  switch (found) {
    case block_state::live:
      throw usage_error(fmt::format("vram: free of {:#x} with size {}, but the block was allocated with size {} "
                                    "(rounded to 512); the pool is unchanged", p, bytes, size));
    case block_state::cached:
    case block_state::gone:
      throw usage_error(fmt::format("vram: double free of {:#x} ({} bytes): the block is already free; the pool is "
                                    "unchanged", p, bytes));
    case block_state::empty:
      break;
  }
  throw usage_error(fmt::format("vram: free of {:#x} ({} bytes): not a block this pool handed out; the pool is "
                                "unchanged", p, bytes));
}

void pool_resource::release_locked(device_ptr p, std::size_t rounded, stream_id stream, std::vector<stream_id> extra) {
  table_.transition(p, detail::block_state::cached, detail::block_state::gone);
  if (!multi_stream_ && extra.empty()) {
    arena_.deallocate(p, rounded);
    if (std::find(unsynchronized_.begin(), unsynchronized_.end(), stream) == unsynchronized_.end())
      unsynchronized_.push_back(stream);
    return;
  }
  pending_free f{p, rounded, stream, {}};
  extra.push_back(stream);
  std::sort(extra.begin(), extra.end());
  extra.erase(std::unique(extra.begin(), extra.end()), extra.end());
  for (auto s : extra) {
    const event_id e = take_event_locked();
    device_->event_record(e, s);
    f.events.push_back(e);
  }
  pending_bytes_ += rounded;
  pending_.push_back(std::move(f));
}

event_id pool_resource::take_event_locked() {
  if (spare_events_.empty()) return device_->event_create();
  const event_id e = spare_events_.back();
  spare_events_.pop_back();
  return e;
}

bool pool_resource::event_done_locked(event_id e, bool wait) {
  if (device_->event_query(e)) return true;
  if (!wait) return false;
  device_->event_synchronize(e);  // the host waits: out-of-memory recovery and trim() only
  ++stats_.host_waits;
  return true;
}

void pool_resource::process_pending_locked(bool wait) {
  std::erase_if(pending_, [&](pending_free& f) {
    for (auto e : f.events)
      if (!event_done_locked(e, wait)) return false;
    for (auto e : f.events) spare_events_.push_back(e);
    pending_bytes_ -= f.size;
    arena_.deallocate(f.ptr, f.size);
    return true;
  });
}

std::uint64_t pool_resource::fence_locked() {
  if (!unsynchronized_.empty()) {
    fence_rec f{next_fence_++, {}};
    for (auto s : unsynchronized_) {
      const event_id e = take_event_locked();
      device_->event_record(e, s);
      f.events.push_back(e);
    }
    unsynchronized_.clear();
    fences_.push_back(std::move(f));
  }
  return fences_.empty() ? 0 : fences_.back().id;
}

bool pool_resource::fence_done_locked(std::uint64_t id, bool wait) {
  // Fences complete in the order they were recorded only per stream, so a fence counts as done once it and
  // every earlier one have completed.
  while (!fences_.empty() && fences_.front().id <= id) {
    for (auto e : fences_.front().events)
      if (!event_done_locked(e, wait)) return false;
    for (auto e : fences_.front().events) spare_events_.push_back(e);
    fences_.pop_front();
  }
  return true;
}

void pool_resource::note_stream_locked(stream_id stream) {
  if (!streams_.insert(stream).second || streams_.size() < 2) return;
  if (!multi_stream_) {
    // A second stream: memory freed so far went back without events, and work queued on the streams used
    // so far may still use it. Events mark that work; this stream and every later one wait for them on the
    // device, so nothing they run overlaps it. The host does not wait. From now on frees carry events.
    for (auto s : streams_) {
      if (s == stream) continue;
      const event_id e = device_->event_create();
      device_->event_record(e, s);
      first_streams_.push_back(e);
    }
    multi_stream_ = true;
  }
  for (auto e : first_streams_) device_->stream_wait_event(stream, e);
}

bool pool_resource::others_cache_locked() const noexcept {
  const detail::thread_cache* mine = my_cache_if_any();
  for (const auto& c : caches_)
    if (c.get() != mine && c->cached_bytes() > 0) return true;
  return false;
}

bool pool_resource::flush_caches_locked(bool large_only, bool others) {
  std::vector<detail::cache_entry> out;
  auto drain = [&](detail::thread_cache& c) { large_only ? c.drain_large(out) : c.drain(out); };
  detail::thread_cache* mine = my_cache_if_any();
  if (mine != nullptr) drain(*mine);  // this thread's own: it is not in the hot path now
  bool held = false;  // by another thread: only then is the hot path stopped
  for (const auto& c : caches_)
    held = held || (others && c.get() != mine && (large_only ? c->large_bytes() : c->cached_bytes()) > 0);
  if (held) {
    with_threads_stopped_locked([&] {
      for (auto& c : caches_)
        if (c.get() != mine) drain(*c);
    });
  }
  for (const auto& e : out) release_locked(e.ptr, e.size, e.stream);
  return held;
}

void pool_resource::sync_mirrors_locked() {
  reserved_mirror_.store(arena_.reserved(), std::memory_order_relaxed);
  in_use_mirror_.store(arena_.in_use(), std::memory_order_relaxed);
  pending_mirror_.store(pending_bytes_, std::memory_order_relaxed);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, arena_.reserved());
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, arena_.in_use() - pending_bytes_);
}

std::size_t pool_resource::live_bytes_locked() const noexcept {
  std::size_t thread_cached = 0;
  for (const auto& c : caches_) thread_cached += c->cached_bytes();
  const std::size_t held = pending_bytes_ + thread_cached;
  return arena_.in_use() > held ? arena_.in_use() - held : 0;
}

std::size_t pool_resource::allocated_bytes() const noexcept {
  // Without the lock: exact when no other thread is inside the pool, a close reading otherwise.
  std::size_t cached = 0;
  for (std::size_t i = 0, n = cache_count_.load(std::memory_order_acquire); i < n; ++i)
    cached += cache_slots_[i].load(std::memory_order_acquire)->cached_bytes();
  const std::size_t in_use = in_use_mirror_.load(std::memory_order_relaxed);
  const std::size_t held = pending_mirror_.load(std::memory_order_relaxed) + cached;
  return in_use > held ? in_use - held : 0;
}

void pool_resource::record_stream(device_ptr p, stream_id stream) {
  std::lock_guard lock(mutex_);
  if (table_.lookup(p) != detail::block_state::live)
    throw usage_error(fmt::format("vram: record_stream of {:#x}: not a live block of this pool", p));
  note_stream_locked(stream);
  recorded_[p].push_back(stream);
  recorded_count_.store(recorded_.size(), std::memory_order_release);
}

free_space pool_resource::free_memory() const {
  std::lock_guard lock(mutex_);
  return arena_.free_memory();
}

std::size_t pool_resource::trim() {
  std::lock_guard lock(mutex_);
  flush_caches_locked();
  process_pending_locked(true);
  const std::size_t released = arena_.trim();
  sync_mirrors_locked();
  return released;
}

void pool_resource::set_limit(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  arena_.set_limit(bytes);
}

std::size_t pool_resource::limit() const {
  std::lock_guard lock(mutex_);
  return arena_.limit();
}

pool_stats pool_resource::stats() const {
  std::lock_guard lock(mutex_);
  pool_stats s = stats_;
  std::int64_t requested = static_cast<std::int64_t>(stats_.requested_bytes);
  for (const auto& c : caches_) {
    s.allocations += c->allocations.load(std::memory_order_relaxed);
    s.frees += c->frees.load(std::memory_order_relaxed);
    requested += c->requested.load(std::memory_order_relaxed);
    s.thread_cached_bytes += c->cached_bytes();
  }
  s.requested_bytes = static_cast<std::size_t>(std::max<std::int64_t>(requested, 0));
  s.pending_bytes = pending_bytes_;
  s.reserved_bytes = arena_.reserved();
  s.mapped_bytes = arena_.mapped();
  s.allocated_bytes = arena_.in_use() - pending_bytes_ - s.thread_cached_bytes;
  s.cached_bytes = s.reserved_bytes - s.allocated_bytes;
  s.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, s.allocated_bytes);  // never below the current
  s.arena = arena_.counters();
  return s;
}

std::vector<std::pair<std::string, std::uint64_t>> pool_resource::counters() const {
  const pool_stats s = stats();
  const auto& a = s.arena;
  return {{"handles_created", a.handles_created},
          {"handles_released", a.handles_released},
          {"handles_mapped", a.handles_mapped},
          {"handles_unmapped", a.handles_unmapped},
          {"aliases_mapped", a.aliases_mapped},
          {"growths", a.growths},
          {"hole_growths", a.hole_growths},
          {"lean_growths", a.lean_growths},
          {"burst_growths", a.burst_growths},
          {"aliased_growths", a.aliased_growths},
          {"views_dissolved", a.views_dissolved},
          {"out_of_memory_recoveries", a.out_of_memory_recoveries},
          {"last_resort_growths", a.last_resort_growths},
          {"unmaps_deferred", a.unmaps_deferred},
          {"hot_path_stops", s.hot_path_stops},
          {"host_waits", s.host_waits},
          {"take_back_growths", s.take_back_growths}};
}

void pool_resource::reset_peak_stats() {
  std::lock_guard lock(mutex_);
  stats_.peak_reserved_bytes = arena_.reserved();
  stats_.peak_allocated_bytes = live_bytes_locked();
}

void pool_resource::validate() const {
  std::lock_guard lock(mutex_);
  arena_.validate();
  std::size_t in_blocks = 0, cached = 0;
  table_.for_each([&](device_ptr, detail::block_state st, std::size_t size) {
    in_blocks += size;
    if (st == detail::block_state::cached) cached += size;
  });
  std::size_t thread_cached = 0;
  for (const auto& c : caches_) thread_cached += c->cached_bytes();
  if (arena_.in_use() != in_blocks + pending_bytes_)
    throw invariant_error(fmt::format("vram pool: arena in use {} != blocks {} + pending {}", arena_.in_use(), in_blocks,
                                      pending_bytes_));
  if (cached != thread_cached)
    throw invariant_error(fmt::format("vram pool: {} bytes of blocks cached, threads hold {}", cached, thread_cached));
  if (reserved_mirror_.load() != arena_.reserved())
    throw invariant_error("vram pool: reserved bytes out of date");
}

std::string pool_resource::out_of_memory_message(std::size_t bytes, stream_id stream) const {
  const auto s = stats();
  const auto f = free_memory();
  const auto info = device_->mem_info();
  const double frag = f.total == 0 ? 0.0 : 1.0 - static_cast<double>(f.largest) / static_cast<double>(f.total);
  const std::size_t lim = limit();
  if (const bool by_limit = lim != 0 && lim < info.total; round_up(bytes, 512) > (by_limit ? lim : info.total))
    return fmt::format("vram: out of memory allocating {} on stream {}: more than the {} holds ({}). Ask for less, or {}.",
                       format_bytes(bytes), stream, by_limit ? "limit" : "device",
                       format_bytes(by_limit ? lim : info.total), by_limit ? "raise the limit" : "use a larger device");
  return fmt::format(
      "vram: out of memory allocating {} on stream {}: {} live ({} allocated); the pool reserves {} ({} cached, largest "
      "free range {}, fragmentation {:.1f}%){}; the device has {} free of {}. Free live blocks, ask for less, {}use a "
      "larger device.",
      format_bytes(bytes), stream, format_bytes(s.requested_bytes), format_bytes(s.allocated_bytes),
      format_bytes(s.reserved_bytes), format_bytes(s.cached_bytes), format_bytes(f.largest), 100.0 * frag,
      lim ? fmt::format(", limit {}", format_bytes(lim)) : std::string(), format_bytes(info.free), format_bytes(info.total),
      lim ? "raise the limit, or " : "or ");
}

nlohmann::json pool_resource::snapshot() const {
  std::lock_guard lock(mutex_);
  nlohmann::json handles = nlohmann::json::array();
  for (const auto& h : arena_.handles())
    handles.push_back({{"address", h.views.empty() ? device_ptr{0} : h.views.front()},
                       {"views", h.views},
                       {"bytes", h.bytes},
                       {"busy_granules", h.busy_granules}});
  nlohmann::json free_ranges = nlohmann::json::array();
  for (const auto& [addr, size] : arena_.free_ranges()) free_ranges.push_back({addr, size});
  nlohmann::json blocks = nlohmann::json::array();
  table_.for_each([&](device_ptr p, detail::block_state st, std::size_t size) {
    blocks.push_back({{"address", p}, {"bytes", size}, {"state", st == detail::block_state::live ? "live" : "cached"}});
  });
  const free_space f = arena_.free_memory();
  return {{"policy", "vram"},
          {"device", device_->name()},
          {"address_range", {{"base", arena_.base()}, {"bytes", arena_.span()}}},
          {"granularity", arena_.granularity()},
          {"reserved_bytes", arena_.reserved()},
          {"in_use_bytes", arena_.in_use()},
          {"pending_bytes", pending_bytes_},
          {"mapped_bytes", arena_.mapped()},
          {"free_bytes", f.total},
          {"largest_free_bytes", f.largest},
          {"handles", handles},
          {"free_ranges", free_ranges},
          {"blocks", blocks}};
}

std::unique_ptr<memory_resource> make_vram_pool_resource(device& dev, const policy_options& options) {
  return std::make_unique<pool_resource>(dev, pool_options::from_environment().with(options));
}

}  // namespace vram
