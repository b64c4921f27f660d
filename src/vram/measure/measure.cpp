// The measuring loop of one cell (measure.hpp).
// Decisions:
//  - The barrier is C++20's std::barrier; its completion function (run by one thread while the others wait)
//    sets the common start and deadline, so no thread starts before the last one is ready.
//  - A thread that fails still arrives at the barrier, then stops: no thread waits forever for it.
//  - Batches double from 1 while one takes < 20 us, and never run past the count: slow allocators (a 1 GiB
//    cudaMalloc) read the clock after every pair, fast ones every few thousand.
#include "vram/measure/measure.hpp"

#include <atomic>
#include <barrier>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#include <time.h>

#include <fmt/format.h>

#include "vram/core/error.hpp"

namespace vram::measure {

namespace {

using clock_type = std::chrono::steady_clock;

constexpr auto batch_target = std::chrono::microseconds(20);

double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// @brief The calling thread's CPU time in seconds.
double thread_cpu_seconds() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

std::uint64_t cell_result::pairs() const noexcept {
  std::uint64_t n = 0;
  for (const auto& t : threads) n += t.pairs;
  return n;
}

double cell_result::ns_per_pair() const noexcept {
  double s = 0;
  for (const auto& t : threads) s += t.seconds;
  const std::uint64_t n = pairs();
  return n == 0 ? 0.0 : s * 1e9 / static_cast<double>(n);
}

double cell_result::pairs_per_second() const noexcept {
  double rate = 0;
  for (const auto& t : threads) {
    if (t.seconds > 0) rate += static_cast<double>(t.pairs) / t.seconds;
  }
  return rate;
}

double cell_result::cpu_ns_per_pair() const noexcept {
  double s = 0;
  for (const auto& t : threads) s += t.cpu_seconds;
  const std::uint64_t n = pairs();
  return n == 0 ? 0.0 : s * 1e9 / static_cast<double>(n);
}

double cell_result::cpu_share() const noexcept {
  double cpu = 0, wall = 0;
  for (const auto& t : threads) {
    cpu += t.cpu_seconds;
    wall += t.seconds;
  }
  return wall > 0 ? cpu / wall : 0.0;
}

void cell_result::validate() const {
  if (threads.empty()) throw invariant_error("bench cell: no thread figures");
  for (std::size_t i = 0; i < threads.size(); ++i) {
    if (threads[i].pairs == 0) throw invariant_error(fmt::format("bench cell: thread {} ran no pair", i));
    if (!(threads[i].seconds > 0)) throw invariant_error(fmt::format("bench cell: thread {} measured no time", i));
  }
}

cell_result measure_cell(bench_target& target, const cell_options& o) {
  cell_result result;
  result.threads.resize(o.threads);

  clock_type::time_point start{};
  clock_type::time_point deadline{};
  const auto duration = std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.seconds));
  std::barrier sync(static_cast<std::ptrdiff_t>(o.threads), [&]() noexcept {
    start = clock_type::now();
    deadline = start + duration;
  });

  std::mutex failure_mutex;
  std::exception_ptr failure;
  std::atomic<std::uint64_t> folded{0};
  auto fail = [&](std::exception_ptr e) {
    std::lock_guard lock(failure_mutex);
    if (!failure) failure = e;
  };

  auto body = [&](unsigned index) {
    std::unique_ptr<bench_worker> worker;
    std::uint64_t mine = 0;
    try {
      worker = target.make_worker();
      const auto warm_end = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                                    std::chrono::duration<double>(o.warmup_seconds));
      for (std::uint64_t i = 0; i < o.warmup_pairs && clock_type::now() < warm_end; ++i) {
        mine ^= worker->pairs(o.bytes, 1);
      }
    } catch (...) {
      fail(std::current_exception());
      worker.reset();
    }
    sync.arrive_and_wait();
    if (!worker) return;
    try {
      thread_figures& f = result.threads[index];
      const double cpu_start = thread_cpu_seconds();
      std::uint64_t batch = 1;
      auto now = clock_type::now();
      while (now < deadline && (o.max_pairs == 0 || f.pairs < o.max_pairs)) {
        if (o.max_pairs != 0) batch = std::min(batch, o.max_pairs - f.pairs);
        mine ^= worker->pairs(o.bytes, batch);
        f.pairs += batch;
        const auto after = clock_type::now();
        if (after - now < batch_target) batch *= 2;
        now = after;
      }
      f.seconds = seconds_between(start, now);
      f.cpu_seconds = thread_cpu_seconds() - cpu_start;
    } catch (...) {
      fail(std::current_exception());
    }
    worker.reset();  // a CUDA worker synchronizes and destroys its stream here, outside the timed part
    folded.fetch_xor(mine, std::memory_order_relaxed);
  };

  {
    std::vector<std::jthread> threads;
    threads.reserve(o.threads);
    for (unsigned i = 0; i < o.threads; ++i) threads.emplace_back(body, i);
  }
  if (failure) std::rethrow_exception(failure);
  result.folded = folded.load();
  return result;
}

}  // namespace vram::measure
