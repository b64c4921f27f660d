#pragma once
// vram's pool: the `vram` policy and the allocator programs link. Thread-safe.
//  - Placement and physical memory: an arena that maps memory only where blocks sit and recycles wholly free
//    handles to wherever memory is wanted (arena.hpp). Blocks live in three zones by size: up to 64 KiB, up
//    to 256 KiB, larger. Small blocks never pin the handles under large ones, and tiny ones, which a granule
//    holds by the dozen, do not scatter over the granules of the small ones, each keeping one granule held.
//  - Hot path: each thread keeps the blocks it frees (thread_cache.hpp) and a block's state lives in a table
//    read without a lock (block_table.hpp), so a cached alloc + free takes no mutex and makes no atomic
//    read-modify-write; frees from any thread. When the lock holder must touch other threads' caches or grow
//    the table it stops the hot path: it raises stop_, issues a heavy fence (asymmetric_fence.hpp) and waits
//    until no thread is inside its cache; threads arriving meanwhile take the slow path.
//  - Stream order, without waiting on the host: a cached block is reused only on the stream it was freed on.
//    Once a second stream is seen, a block leaving a cache is held until an event recorded on its stream at
//    the free completes (and on every stream record_stream() named). Memory freed before that went back
//    without events: every stream seen after the first is made to wait, on the device (cuStreamWaitEvent),
//    for the work queued on the earlier streams when the second appeared. cuMemUnmap does not wait for the
//    device, so an unmap is fenced: events recorded on the streams that freed without one since the last
//    fence; a view whose fence has not completed stays mapped until it has (arena::set_unmap_fence). The
//    host waits only in out-of-memory recovery and trim(), and never for the whole device.
//  - Limits and release: set_limit(), trim(); when the device refuses, caches are flushed, pending frees
//    waited for, cold handles recycled, and the request retried before it fails.
// See docs/pool.md for the design and the measurements behind its settings.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "vram/pool/arena.hpp"
#include "vram/pool/block_table.hpp"
#include "vram/pool/pool_options.hpp"
#include "vram/pool/thread_cache.hpp"
#include "vram/resource/memory_resource.hpp"

namespace vram {

/// @brief The pool's statistics: current and peak figures, and counts of calls.
struct pool_stats {
  std::size_t requested_bytes = 0;                            // bytes the program asked for, live
  std::size_t allocated_bytes = 0;                            // rounded sizes of live blocks
  std::size_t peak_allocated_bytes = 0;  // peak of bytes in blocks handed to threads (live or in their caches)
  std::size_t reserved_bytes = 0, peak_reserved_bytes = 0;    // held from the device
  std::size_t cached_bytes = 0;                               // reserved but in no live block
  std::size_t thread_cached_bytes = 0;                        // of which in threads' caches
  std::size_t pending_bytes = 0;                              // freed, waiting for stream work
  std::size_t mapped_bytes = 0;
  std::uint64_t allocations = 0, frees = 0, failed_allocations = 0;
  std::uint64_t hot_path_stops = 0;  // times every thread was held out of the hot path (flushes, table growth)
  std::uint64_t host_waits = 0;      // times the host waited for the device (out-of-memory recovery, trim)
  // growths made in place of taking other threads' cached blocks back, as the last take-back was less than
  // take_back_window_ns ago and the growth keeps under reserve_ratio x the peak of the bytes in blocks
  std::uint64_t take_back_growths = 0;
  detail::arena_counters arena;
};

class pool_resource final : public memory_resource {
 public:
  /// Requests up to this size go to the tiny zone (zone 0): a 2 MiB granule holds at least 32 of them.
  static constexpr std::size_t tiny_max = std::size_t{64} << 10;
  /// Larger requests up to this size go to the small zone (zone 1), the rest to the large zone (zone 2),
  /// where they share granules with the ends of large blocks (docs/pool.md: 256 KiB against 1 MiB).
  static constexpr std::size_t small_max = std::size_t{256} << 10;
  /// A request that finds mapped memory only in other threads' caches takes it back, which stops every
  /// thread; when the last such take-back was less than this long ago (the device's time), the threads
  /// together hold more blocks than the pool has, and it grows instead, under its reserve bound.
  static constexpr std::int64_t take_back_window_ns = 1'000'000;

  explicit pool_resource(device& dev, pool_options options = pool_options::from_environment());
  ~pool_resource() override;

  std::string_view name() const noexcept override { return "vram"; }
  free_space free_memory() const override;
  void release_cached() override { trim(); }
  void validate() const override;
  std::vector<std::pair<std::string, std::uint64_t>> counters() const override;
  void record_stream(device_ptr p, stream_id stream) override;
  std::size_t reserved_bytes() const noexcept override { return reserved_mirror_.load(std::memory_order_relaxed); }
  std::size_t allocated_bytes() const noexcept override;

  /// @brief Flushes threads' caches and gives every wholly free handle back to the device. Returns the bytes released.
  std::size_t trim();
  /// @brief Most bytes the pool may hold from the device (0: none).
  void set_limit(std::size_t bytes);
  std::size_t limit() const;
  pool_stats stats() const;
  /// @brief Sets the peaks of stats() (allocated, reserved) to the current figures.
  void reset_peak_stats();
  /// @brief The pool's address ranges, handles, free ranges and blocks, as JSON (docs/pool.md).
  nlohmann::json snapshot() const;

 protected:
  device_ptr do_allocate(std::size_t bytes, stream_id stream) override;
  void do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) override;
  std::string out_of_memory_message(std::size_t bytes, stream_id stream) const override;

 private:
  struct pending_free {
    device_ptr ptr;
    std::size_t size;
    stream_id stream;
    std::vector<event_id> events;
  };
  detail::thread_cache* my_cache();
  [[gnu::noinline]] detail::thread_cache* my_cache_slow();
  detail::thread_cache* my_cache_if_any() const noexcept;  // without making one
  /// Runs @p fn while no thread is inside its cache or the block table. pre: mutex_ held.
  template <class F>
  void with_threads_stopped_locked(F&& fn) {
    stop_.store(true, std::memory_order_seq_cst);
    if (asymmetric_) detail::heavy_fence();
    for (const auto& c : caches_) c->wait_idle();
    ++stats_.hot_path_stops;
    fn();
    stop_.store(false, std::memory_order_release);
  }
  device_ptr allocate_locked(std::size_t rounded, stream_id stream);
  void release_locked(device_ptr p, std::size_t rounded, stream_id stream, std::vector<stream_id> extra = {});
  void note_stream_locked(stream_id stream);
  /// Gives the blocks that threads' caches keep back to the arena (or pending): the caller's own, and with
  /// @p others every other thread's; with @p large_only, only large blocks, so that a large request that
  /// missed the caller's cache is placed by best fit over them. Stops the hot path only when another thread's
  /// blocks are taken and it holds some. pre: mutex_ held, the caller outside its cache.
  /// Returns whether another thread's blocks were taken (the hot path was stopped).
  bool flush_caches_locked(bool large_only = false, bool others = true);
  /// Whether another thread's cache holds a block. pre: mutex_ held.
  bool others_cache_locked() const noexcept;
  void process_pending_locked(bool wait);
  event_id take_event_locked();
  /// Whether the work @p e marks is complete; with @p wait, waits for it (and counts the wait) when not.
  bool event_done_locked(event_id e, bool wait);
  std::uint64_t fence_locked();
  bool fence_done_locked(std::uint64_t id, bool wait);
  void sync_mirrors_locked();
  /// Bytes in blocks handed out: the arena's in use, less pending frees and blocks in threads' caches.
  std::size_t live_bytes_locked() const noexcept;
  [[noreturn]] void bad_free(device_ptr p, std::size_t bytes, detail::block_state found, std::size_t size) const;

  pool_options options_;
  const std::uint64_t id_;  // tells this pool's thread caches from those of a pool since destroyed
  const bool asymmetric_;   // the hot path's fence is a compiler barrier (asymmetric_fence.hpp)
  std::atomic<bool> stop_{false};  // raised while the lock holder needs the hot path to stand still
  mutable std::mutex mutex_;
  detail::arena arena_;
  detail::block_table table_;
  std::vector<std::unique_ptr<detail::thread_cache>> caches_;  // every thread's cache (under mutex_)
  static constexpr std::size_t max_caches = 1024;               // threads past this many use the slow path
  std::array<std::atomic<detail::thread_cache*>, max_caches> cache_slots_{};  // caches_, readable without the lock
  std::atomic<std::size_t> cache_count_{0};
  std::vector<detail::thread_cache*> idle_caches_;             // of threads that exited
  std::shared_ptr<int> alive_;                                  // threads hold weak_ptrs to it
  std::set<stream_id> streams_;
  bool multi_stream_ = false;
  std::vector<stream_id> unsynchronized_;  // streams that freed into the arena without an event since the last fence
  struct fence_rec {
    std::uint64_t id;
    std::vector<event_id> events;  // one per stream it covers
  };
  std::deque<fence_rec> fences_;           // recorded and not yet seen complete, oldest first
  std::uint64_t next_fence_ = 1;
  std::vector<event_id> first_streams_;    // recorded when a second stream appeared: later streams wait for them
  std::vector<pending_free> pending_;
  std::size_t pending_bytes_ = 0;
  std::int64_t last_take_back_ns_ = INT64_MIN / 4;  // the device's time of the last take-back from other threads
  std::vector<event_id> spare_events_;
  std::unordered_map<device_ptr, std::vector<stream_id>> recorded_;  // record_stream() of live blocks
  std::atomic<std::size_t> recorded_count_{0};
  std::atomic<std::size_t> reserved_mirror_{0};
  std::atomic<std::size_t> in_use_mirror_{0};  // arena bytes in blocks (live or cached in threads)
  std::atomic<std::size_t> pending_mirror_{0};
  pool_stats stats_;  // slow-path counters; hot-path ones live in the caches

  friend struct pool_thread_state;
};

/// @brief The `vram` policy's factory for the registry.
std::unique_ptr<memory_resource> make_vram_pool_resource(device& dev, const policy_options& options);

}  // namespace vram
