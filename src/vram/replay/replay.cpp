// The replay loop: drives one allocator with a trace's program rows and measures memory and time.
// Metrics are updated after every event from the allocator's O(1) counters; the costlier free_memory()
// query runs only when reserved bytes reach a new peak.
#include "vram/replay/replay.hpp"

#include <chrono>
#include <ctime>
#include <limits>
#include <unordered_map>

#include "vram/core/error.hpp"

namespace vram {

namespace detail {

struct live_block {
  device_ptr ptr;       // 0 when the allocation failed: its free is skipped silently
  std::uint64_t size;
  stream_id stream;
};

/// @brief CPU time of the calling thread, in seconds: steady under machine load, unlike wall time.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

device_call_stats difference(const device_call_stats& after, const device_call_stats& before) {
  device_call_stats d;
  for (std::size_t k = 0; k < device_call_kinds; ++k) {
    d.count[k] = after.count[k] - before.count[k];
    d.nanoseconds[k] = after.nanoseconds[k] - before.nanoseconds[k];
  }
  return d;
}

trace_time::trace_time(device& dev, std::int64_t t0_us) : dev_(dev), t0_us_(t0_us) {}
trace_time::~trace_time() { dev_.follow_clock(); }
void trace_time::at(std::int64_t time_us) noexcept {
  // pre: t0_us_ <= time_us (traces never go back), so the difference fits; its nanoseconds may not (a trace
  // that spans more than 292 years of microseconds): those saturate.
  const std::int64_t us = time_us - t0_us_;
  constexpr std::int64_t max_us = std::numeric_limits<std::int64_t>::max() / 1000;
  dev_.set_time(us > max_us ? max_us * 1000 : us * 1000);
}

device_call_stats sum(const device_call_stats& a, const device_call_stats& b) {
  device_call_stats d;
  for (std::size_t k = 0; k < device_call_kinds; ++k) {
    d.count[k] = a.count[k] + b.count[k];
    d.nanoseconds[k] = a.nanoseconds[k] + b.nanoseconds[k];
  }
  return d;
}

using live_table = std::unordered_map<std::uint64_t, live_block>;

}  // namespace detail

void live_blocks::visit(void* fn, void (*call)(void*, device_ptr, std::size_t)) const {
  for (const auto& [addr, b] : *static_cast<const detail::live_table*>(table_))
    if (b.ptr != 0) call(fn, b.ptr, b.size);
}

std::optional<std::size_t> recorded_peak_reserved(const trace& t) {
  bool any = false;
  // Sizes are up to 2^64 - 1 each, so the running sum is kept in 128 bits; the peak saturates at SIZE_MAX.
  __extension__ using int128 = __int128;  // a GCC and Clang type: __extension__ keeps -Wpedantic quiet
  int128 reserved = 0, peak = 0;
  for (const auto& e : t.events) {
    switch (e.action) {
      case trace_action::segment_alloc:
      case trace_action::segment_map:
        reserved += static_cast<int128>(e.size);
        any = true;
        break;
      case trace_action::segment_free:
      case trace_action::segment_unmap:
        reserved -= static_cast<int128>(e.size);
        any = true;
        break;
      default: continue;
    }
    if (reserved > peak) peak = reserved;
  }
  if (!any) return std::nullopt;
  constexpr auto most = static_cast<int128>(std::numeric_limits<std::size_t>::max());
  return static_cast<std::size_t>(peak > most ? most : peak);
}

replay_result replay(const trace& t, memory_resource& resource, const replay_options& options) {
  replay_result r;
  r.trace = t.name;
  r.policy = std::string(resource.name());
  r.trace_seconds = t.seconds();
  r.recorded_peak_reserved_bytes = recorded_peak_reserved(t);

  device& dev = resource.upstream_device();
  device_call_stats query_calls;
  const std::size_t used_before = [&] {
    const memory_info info = dev.mem_info();
    return info.total - info.free;
  }();
  const device_call_stats calls_start = dev.calls();  // the query above is not the allocator's

  detail::live_table live;
  live.reserve(4096);
  std::size_t live_bytes = 0;
  double weighted_ratio = 0, weighted_time = 0;
  const std::int64_t t0 = t.events.empty() ? 0 : t.events.front().time_us;
  detail::trace_time clock(dev, t0);  // the allocator sees the trace's time

  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = detail::thread_cpu_seconds();
  const std::size_t n = t.events.size();
  std::size_t i = 0;
  std::size_t reserved = resource.reserved_bytes();
  std::int64_t state_since = t0;  // the state (live_bytes, reserved) has held since this time
  bool failed = false;            // the current row is an alloc that failed
  const auto tell = [&](std::size_t row, const trace_event& e) {
    const replay_step s{row, e.time_us - t0, live_bytes, resource.reserved_bytes(), e.size,
                        e.action == trace_action::alloc && failed};
    options.observer->step(s, live_blocks(&live));
  };
  for (; i < n; ++i) {
    if (i % replay_options::progress_rows == 0 && i != 0 && options.progress) options.progress(i, n);
    const trace_event& e = t.events[i];
    failed = false;
    // The state before this row held from state_since until now: weight reserved / live by that time.
    if (live_bytes > 0 && e.time_us > state_since) {
      const double dt = static_cast<double>(e.time_us - state_since);
      weighted_ratio += dt * static_cast<double>(reserved) / static_cast<double>(live_bytes);
      weighted_time += dt;
    }
    state_since = e.time_us;
    clock.at(e.time_us);
    if (e.action == trace_action::alloc) {
      ++r.allocations;
      auto [it, fresh] = live.try_emplace(e.addr, detail::live_block{0, e.size, e.stream});
      if (!fresh) {
        // The recorded allocator handed out a live address again: the old block's free was not recorded.
        ++r.unmatched_frees;
        if (it->second.ptr != 0) {
          resource.deallocate(it->second.ptr, it->second.size, it->second.stream);
          live_bytes -= it->second.size;
        }
        it->second = detail::live_block{0, e.size, e.stream};
      }
      const device_ptr p = e.size == 0 ? 0 : resource.try_allocate(e.size, e.stream);
      failed = p == 0 && e.size != 0;
      if (failed) {
        if (r.failed_allocations++ == 0) {
          r.first_failure_event = i;
          r.first_failure_time_s = static_cast<double>(e.time_us - t0) * 1e-6;
          const device_call_stats before_query = dev.calls();  // the query is not the allocator's call
          const auto info = dev.mem_info();
          query_calls = detail::sum(query_calls, detail::difference(dev.calls(), before_query));
          r.free_share_at_first_failure =
              info.total == 0 ? 0.0 : static_cast<double>(info.free) / static_cast<double>(info.total);
        }
        if (options.stop_at_first_failure) {
          if (options.observer != nullptr) tell(i, e);
          ++i;
          break;
        }
      } else {
        it->second.ptr = p;
        live_bytes += e.size;
      }
    } else if (e.action == trace_action::free_requested) {
      auto it = live.find(e.addr);
      if (it == live.end()) {
        ++r.unmatched_frees;
      } else {
        if (it->second.ptr != 0) {
          resource.deallocate(it->second.ptr, it->second.size, it->second.stream);
          live_bytes -= it->second.size;
        }
        live.erase(it);
      }
    } else {
      continue;  // rows of the recorded allocator: compared, not replayed
    }

    if (options.validate_each_step) resource.validate();
    reserved = resource.reserved_bytes();
    if (options.observer != nullptr) tell(i, e);
    if (live_bytes > r.peak_live_bytes) {
      r.peak_live_bytes = live_bytes;
      r.warmup_trace_seconds = static_cast<double>(e.time_us - t0) * 1e-6;
      r.warmup_driver_seconds =
          static_cast<double>(detail::difference(detail::difference(dev.calls(), calls_start), query_calls)
                                  .total_nanoseconds()) * 1e-9;
    }
    if (resource.allocated_bytes() > r.peak_allocated_bytes) r.peak_allocated_bytes = resource.allocated_bytes();
    if (reserved > r.peak_reserved_bytes) {
      r.peak_reserved_bytes = reserved;
      const std::size_t allocated = resource.allocated_bytes();
      r.internal_fragmentation =
          allocated == 0 ? 0.0 : 1.0 - static_cast<double>(live_bytes) / static_cast<double>(allocated);
      const free_space fs = resource.free_memory();
      r.external_fragmentation =
          fs.total == 0 ? 0.0 : 1.0 - static_cast<double>(fs.largest) / static_cast<double>(fs.total);
      // What the device itself reports in use (cuMemGetInfo), beyond what was in use before the replay; the
      // query is not one of the allocator's calls, so its cost is taken out of the counts below.
      const device_call_stats before_query = dev.calls();
      const memory_info info = dev.mem_info();
      query_calls = detail::sum(query_calls, detail::difference(dev.calls(), before_query));
      const std::size_t used = info.total - info.free;
      if (used > used_before) r.peak_device_used_bytes = std::max(r.peak_device_used_bytes, used - used_before);
    }
  }
  const auto stop = std::chrono::steady_clock::now();
  const double cpu_stop = detail::thread_cpu_seconds();

  r.events = i;
  r.final_reserved_bytes = resource.reserved_bytes();
  r.allocator_counters = resource.counters();
  r.reserved_over_live =
      r.peak_live_bytes == 0 ? 0.0 : static_cast<double>(r.peak_reserved_bytes) / static_cast<double>(r.peak_live_bytes);
  r.mean_reserved_over_live = weighted_time > 0 ? weighted_ratio / weighted_time : r.reserved_over_live;
  r.device_calls = detail::difference(detail::difference(dev.calls(), calls_start), query_calls);
  r.modelled_driver_seconds = static_cast<double>(r.device_calls.total_nanoseconds()) * 1e-9;
  r.replay_seconds = std::chrono::duration<double>(stop - start).count();
  r.replay_cpu_seconds = cpu_stop - cpu_start;
  r.events_per_second = r.replay_cpu_seconds > 0 ? static_cast<double>(r.events) / r.replay_cpu_seconds : 0.0;
  r.cpu_ns_per_event = r.events == 0 ? 0.0 : r.replay_cpu_seconds * 1e9 / static_cast<double>(r.events);
  return r;
}

}  // namespace vram
