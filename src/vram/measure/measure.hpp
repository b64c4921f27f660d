#pragma once
// One cell of `vram bench`: T threads, each allocating and freeing one block of one size over and over on
// one allocator, for a fixed time or a fixed count, whichever comes first.
//
// How a cell runs:
//  1. T threads start; each makes its worker and warms it up (a few pairs of the cell's size, so the size is
//     cached where the allocator caches), then waits at a barrier;
//  2. the barrier's completion reads the clock once: that is every thread's start, and start + seconds is
//     every thread's deadline;
//  3. each thread runs batches of pairs until the deadline (or its count), reading the clock between
//     batches only; a batch doubles while it takes under 20 us, so the clock costs < 1% of the time;
//  4. each thread's time is its last clock read minus the common start; its CPU time (the thread's own
//     CPU clock, read after the barrier and at the end) is kept beside it.
// Figures: ns_per_pair is the threads' time summed over the pairs summed (the mean cost of one pair to the
// thread that makes it); pairs_per_second is the sum over threads of pairs / time (the throughput of all).
// steady_clock throughout. cpu_share is CPU time over wall time: 1 when every thread ran all the time; below
// 1 when the threads waited (a lock, the driver) or other work had the cores, which a busy machine shows
// as low shares for allocators that never wait (glibc's malloc).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vram/measure/bench_target.hpp"

namespace vram::measure {

struct cell_options {
  std::size_t bytes = 512;
  unsigned threads = 1;
  double seconds = 0.2;               // per thread, after warm-up
  std::uint64_t max_pairs = 0;        // per thread; 0: no count, time alone
  std::uint64_t warmup_pairs = 16;    // per thread, before the barrier (stops early after warmup_seconds)
  double warmup_seconds = 0.05;
};

/// @brief What one thread did in the timed part.
struct thread_figures {
  std::uint64_t pairs = 0;
  double seconds = 0;
  double cpu_seconds = 0;
};

struct cell_result {
  std::vector<thread_figures> threads;  // one per thread, in thread order
  std::uint64_t folded = 0;             // the workers' results, xor'ed (keeps the work observable)

  std::uint64_t pairs() const noexcept;
  /// @brief Summed thread time over summed pairs, in ns; 0 when no pair ran.
  double ns_per_pair() const noexcept;
  /// @brief Sum over threads of pairs / seconds; 0 when no time was measured.
  double pairs_per_second() const noexcept;
  /// @brief Summed thread CPU time over summed pairs, in ns; 0 when no pair ran.
  double cpu_ns_per_pair() const noexcept;
  /// @brief Summed thread CPU time over summed thread time; 0 when no time was measured.
  double cpu_share() const noexcept;
  /// @brief Checks that every thread ran at least one pair in a positive time; throws invariant_error.
  void validate() const;
};

/// @brief Runs one cell. Exceptions thrown by a worker (made or running) are rethrown here, the first one,
/// after every thread has stopped.
/// pre: o.bytes > 0, o.threads > 0, o.seconds > 0.
cell_result measure_cell(bench_target& target, const cell_options& o);

}  // namespace vram::measure
