#pragma once
// Replays a trace against one allocator and measures it. The program's own rows drive the allocator:
// `alloc` calls allocate(size, stream) and `free_requested` calls deallocate; `free_completed` and the
// segment rows are what the recorded allocator did, kept only for comparison (recorded peak reserved).
// A free that matches no live block is counted and skipped; an allocation the allocator cannot serve is
// counted as failed, and its later free is skipped. The device's time follows the rows' times (trace_time).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vram/device/device.hpp"
#include "vram/resource/memory_resource.hpp"
#include "vram/trace/trace.hpp"

namespace vram {

/// @brief One program row (alloc or free_requested) as the replay left it, after the allocator answered.
struct replay_step {
  std::size_t index = 0;           // the row's index in the trace
  std::int64_t time_us = 0;        // the row's time, from the trace's first row
  std::size_t live_bytes = 0;      // requested bytes of the blocks live after the row
  std::size_t reserved_bytes = 0;  // the allocator's reserved bytes after the row
  std::size_t request_bytes = 0;   // the row's size
  bool failed = false;             // an alloc row the allocator could not serve
};

/// @brief The blocks live at a step, as the allocator placed them (valid during replay_observer::step only).
class live_blocks {
 public:
  explicit live_blocks(const void* table) noexcept : table_(table) {}
  /// @brief Calls @p f(ptr, requested bytes) for each live block, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    visit(&f, [](void* fn, device_ptr p, std::size_t bytes) { (*static_cast<F*>(fn))(p, bytes); });
  }

 private:
  void visit(void* fn, void (*call)(void*, device_ptr, std::size_t)) const;
  const void* table_;
};

/// @brief Watches a replay row by row (vram report draws from it). Called after every program row.
class replay_observer {
 public:
  virtual ~replay_observer() = default;
  virtual void step(const replay_step& s, const live_blocks& blocks) = 0;
};

struct replay_options {
  bool validate_each_step = false;  // run the allocator's validate() after every event (tests, debug)
  bool stop_at_first_failure = false;  // end at the first failed allocation (vram fit)
  replay_observer* observer = nullptr;  // told of every program row, where set
  /// Where set, called before each 1024th row with (rows done, rows in all): a progress line for long replays
  /// (one under validate_each_step takes minutes), at no cost a row.
  std::function<void(std::size_t, std::size_t)> progress;
  static constexpr std::size_t progress_rows = 1024;
};

/// @brief What one replay measured. Byte figures are exact; times are seconds.
struct replay_result {
  std::string trace;
  std::string policy;
  std::uint64_t events = 0;
  std::uint64_t allocations = 0;
  std::uint64_t failed_allocations = 0;
  std::optional<std::uint64_t> first_failure_event;  // index of the first failed alloc row
  double first_failure_time_s = 0;                   // trace time of that row from the start
  double free_share_at_first_failure = 0;            // device free / total at that moment
  std::uint64_t unmatched_frees = 0;

  std::size_t peak_live_bytes = 0;      // max over time of the sum of requested sizes
  std::size_t peak_reserved_bytes = 0;  // max over time of the allocator's reserved bytes
  std::size_t peak_allocated_bytes = 0;
  double reserved_over_live = 0;        // peak_reserved / peak_live
  double internal_fragmentation = 0;    // 1 - live / allocated, at the moment of peak reserved
  double external_fragmentation = 0;    // 1 - largest free block / free inside the allocator, at peak reserved
  double mean_reserved_over_live = 0;   // time-weighted mean of reserved / live while live > 0
  std::optional<std::size_t> recorded_peak_reserved_bytes;  // from segment rows, where the trace has them
  std::size_t final_reserved_bytes = 0;

  double trace_seconds = 0;
  device_call_stats device_calls;       // calls the allocator made during the replay
  double modelled_driver_seconds = 0;   // their time (modelled on the simulated device)
  // Warm-up: the rows up to the one at which live bytes first reached their peak (the first growth to the
  // working set), its trace time from the first row, and the time of the calls made up to then.
  double warmup_trace_seconds = 0;
  double warmup_driver_seconds = 0;
  double replay_seconds = 0;            // wall time of the replay
  double replay_cpu_seconds = 0;        // CPU time of the replaying thread (steady under machine load)
  double events_per_second = 0;         // events / CPU second
  std::size_t peak_device_used_bytes = 0;  // device memory in use at the moments of peak reserved (see replay.cpp)
  double cpu_ns_per_event = 0;
  std::vector<std::pair<std::string, std::uint64_t>> allocator_counters;  // memory_resource::counters() at the end
};

/// @brief Replays @p t against @p resource (over its device).
replay_result replay(const trace& t, memory_resource& resource, const replay_options& options = {});

namespace detail {
/// @brief While it lives, the device tells the time of the trace row being replayed (from the first row),
/// so a pool that decides from time decides as it would have while the trace was recorded.
class trace_time {
 public:
  trace_time(device& dev, std::int64_t t0_us);
  ~trace_time();
  trace_time(const trace_time&) = delete;
  trace_time& operator=(const trace_time&) = delete;
  void at(std::int64_t time_us) noexcept;

 private:
  device& dev_;
  std::int64_t t0_us_;
};
}  // namespace detail

/// @brief The recorded allocator's peak reserved bytes from segment rows, if the trace has any.
std::optional<std::size_t> recorded_peak_reserved(const trace& t);

}  // namespace vram
