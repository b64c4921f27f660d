// vram's pool under threads, on a simulated device: four threads allocate and free at random sizes (512 B to
// 8 MiB, seeded per thread), handing blocks to each other through a shared queue so that many blocks are freed
// by a thread other than the one that allocated them; every allocation is checked against an interval map of
// the live blocks, so a block handed out twice while live is caught at once. A second test has threads call
// record_stream on a held stream and other threads free those blocks: none may be handed out again while the
// recorded stream's work is in flight.
//
// ctest labels this file `concurrency` (its name contains "stress") and CI runs it under ThreadSanitizer.
// Operations: 1,000,000 by default (the plain build); VRAM_STRESS_OPS overrides it; under ThreadSanitizer the
// default is 200,000, which keeps the run within a minute there.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/pool/pool_resource.hpp"

#if defined(__SANITIZE_THREAD__)
#define VRAM_STRESS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VRAM_STRESS_TSAN 1
#endif
#endif

namespace vram {
namespace {

constexpr int threads = 4;

std::uint64_t stress_operations() {
  if (const char* text = std::getenv("VRAM_STRESS_OPS"); text != nullptr && *text != '\0') {
    return std::strtoull(text, nullptr, 10);
  }
#ifdef VRAM_STRESS_TSAN
  return 200'000;
#else
  return 1'000'000;
#endif
}

sim_device_options stress_device() {
  sim_device_options o;
  o.capacity = 16 * GiB;
  o.costs = cost_model::zero();
  o.label = "stress device";
  return o;
}

struct block {
  device_ptr p;
  std::size_t bytes;
  stream_id stream;
};

/// Live blocks of every thread, checked on each allocation; the first problem found is kept for the report.
class live_blocks {
 public:
  /// @brief Records a block just handed out; notes a problem when it overlaps a live one.
  void add(const block& b) {
    std::lock_guard lock(mutex_);
    if (b.p == 0 || b.p % 512 != 0) return note(fmt("block at bad address", b));
    auto next = blocks_.lower_bound(b.p);
    if (next != blocks_.end() && next->first < b.p + b.bytes) return note(fmt("overlaps the next live block", b));
    if (next != blocks_.begin() && std::prev(next)->first + std::prev(next)->second > b.p) {
      return note(fmt("overlaps the previous live block", b));
    }
    blocks_.emplace_hint(next, b.p, b.bytes);
  }
  /// @brief Forgets a block; called before the block is given back to the pool.
  void remove(const block& b) {
    std::lock_guard lock(mutex_);
    if (blocks_.erase(b.p) != 1) note(fmt("freed block was not live", b));
  }
  void note(std::string problem) {
    if (problem_.empty()) problem_ = std::move(problem);
  }
  std::string problem() const {
    std::lock_guard lock(mutex_);
    return problem_;
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return blocks_.size();
  }

 private:
  static std::string fmt(const char* what, const block& b) {
    return std::string(what) + ": " + std::to_string(b.bytes) + " bytes at " + std::to_string(b.p) + " on stream " +
           std::to_string(b.stream);
  }
  mutable std::mutex mutex_;
  std::map<device_ptr, std::size_t> blocks_;
  std::string problem_;
};

/// Blocks in transit from one thread to another.
class hand_off {
 public:
  bool push(const block& b) {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= 256) return false;
    queue_.push_back(b);
    return true;
  }
  bool pop(block& b) {
    std::lock_guard lock(mutex_);
    if (queue_.empty()) return false;
    b = queue_.front();
    queue_.pop_front();
    return true;
  }

 private:
  std::mutex mutex_;
  std::deque<block> queue_;
};

/// Log-uniform in [512 B, 8 MiB], not rounded, so the pool's 512-byte rounding is exercised.
std::size_t random_size(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> exponent(9.0, 23.0);
  return static_cast<std::size_t>(std::exp2(exponent(rng)));
}

struct run_totals {
  std::atomic<std::uint64_t> operations{0}, failed{0}, cross_thread_frees{0};
};

/// One thread: `ops` allocations and frees. It keeps up to 32 blocks of its own, passes some to the queue and
/// frees blocks other threads passed; at the end it frees what it holds.
void worker(pool_resource& pool, live_blocks& live, hand_off& queue, run_totals& totals, int index,
            std::uint64_t ops) {
  std::mt19937_64 rng(7000 + index);
  std::vector<block> own;
  auto free_block = [&](const block& b) {
    live.remove(b);
    pool.deallocate(b.p, b.bytes, b.stream);
  };
  for (std::uint64_t done = 0; done < ops;) {
    const unsigned pick = rng() % 100;
    if (own.empty() || (pick < 45 && own.size() < 32)) {
      const block b{0, random_size(rng), rng() % 3};
      const device_ptr p = pool.try_allocate(b.bytes, b.stream);
      ++done;
      if (p == 0) {
        totals.failed.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      own.push_back({p, b.bytes, b.stream});
      live.add(own.back());
    } else if (pick < 80) {
      const std::size_t i = rng() % own.size();
      free_block(own[i]);
      own[i] = own.back();
      own.pop_back();
      ++done;
    } else if (pick < 90) {
      const std::size_t i = rng() % own.size();
      if (queue.push(own[i])) {
        own[i] = own.back();
        own.pop_back();
      }
    } else {
      block b;
      if (queue.pop(b)) {
        free_block(b);  // most likely allocated by another thread
        totals.cross_thread_frees.fetch_add(1, std::memory_order_relaxed);
        ++done;
      }
    }
  }
  for (const block& b : own) free_block(b);
  totals.operations.fetch_add(ops, std::memory_order_relaxed);
}

void run_stress(const pool_options& options, std::uint64_t total_ops) {
  sim_device dev(stress_device());
  {
    pool_resource pool(dev, options);
    live_blocks live;
    hand_off queue;
    run_totals totals;
    std::vector<std::thread> pool_threads;
    for (int t = 0; t < threads; ++t) {
      pool_threads.emplace_back(worker, std::ref(pool), std::ref(live), std::ref(queue), std::ref(totals), t,
                                total_ops / threads);
    }
    for (auto& t : pool_threads) t.join();
    block b;
    while (queue.pop(b)) {
      live.remove(b);
      pool.deallocate(b.p, b.bytes, b.stream);
    }

    EXPECT_EQ(live.problem(), "");
    EXPECT_EQ(live.size(), 0u);
    EXPECT_EQ(totals.operations.load(), total_ops / threads * threads);
    // At most 4 x 32 own + 256 queued blocks of at most 8 MiB are live: 3 GiB of a 16 GiB device.
    EXPECT_EQ(totals.failed.load(), 0u);
    EXPECT_GT(totals.cross_thread_frees.load(), total_ops / 100) << "the hand-off should carry many blocks";
    pool.validate();
    const pool_stats s = pool.stats();
    EXPECT_EQ(s.allocations, s.frees);
    EXPECT_EQ(s.requested_bytes, 0u);
    EXPECT_EQ(pool.allocated_bytes(), 0u);
    EXPECT_GE(s.peak_reserved_bytes, s.peak_allocated_bytes);
    pool.trim();
    pool.validate();
    EXPECT_EQ(pool.reserved_bytes(), 0u);
    EXPECT_EQ(dev.used_bytes(), 0u);
  }
  dev.validate();
}

TEST(pool_stress, four_threads_never_share_a_live_block_with_thread_caches) {
  pool_options o;
  o.thread_cache = true;
  run_stress(o, stress_operations());
}

TEST(pool_stress, four_threads_never_share_a_live_block_without_thread_caches) {
  pool_options o;
  o.thread_cache = false;
  run_stress(o, stress_operations() / 4);
}

void stop_threads_in_their_hot_path(bool membarrier) {
  // Two threads alloc + free one block each, over and over: the hot path, with the block in their caches
  // between pairs. Meanwhile the main thread makes 5,000 blocks of 512 B (the block table grows twice while
  // the two threads run) and calls trim() every 250 blocks, which takes the blocks out of the other threads'
  // caches. Each thread publishes the block it holds; the main thread's new blocks must never be one of them,
  // and every block must be freed exactly once. The threads synchronize with the main thread only through
  // the pool, so ThreadSanitizer sees the pool's own ordering. The main thread starts only once both threads
  // have made a pair, and stops them only once each has made another after its last trim(), so the threads
  // are in their hot path while the table grows and while trim() stops them, however the machine schedules.
  sim_device dev(stress_device());
  {
    pool_options o;
    o.membarrier = membarrier;
    pool_resource pool(dev, o);
    std::atomic<bool> done{false};
    std::array<std::atomic<device_ptr>, 2> held{};
    std::array<std::atomic<std::uint64_t>, 2> pairs{};
    std::array<std::string, 2> problems;
    auto hammer = [&](std::size_t t) {
      const std::size_t bytes = 4096 * (t + 1);
      while (!done.load(std::memory_order_relaxed)) {
        const device_ptr p = pool.allocate(bytes);
        if (p % 512 != 0 && problems[t].empty()) problems[t] = "misaligned block";
        held[t].store(p, std::memory_order_relaxed);
        held[t].store(0, std::memory_order_relaxed);
        pool.deallocate(p, bytes);
        pairs[t].fetch_add(1, std::memory_order_relaxed);
      }
    };
    const auto wait_for_pairs = [&](std::uint64_t a_past, std::uint64_t b_past) {
      while (pairs[0].load(std::memory_order_relaxed) <= a_past || pairs[1].load(std::memory_order_relaxed) <= b_past)
        std::this_thread::yield();
    };
    std::thread a(hammer, 0), b(hammer, 1);
    wait_for_pairs(0, 0);
    std::set<device_ptr> mine;
    std::string problem;
    for (int i = 0; i < 5000; ++i) {
      const device_ptr p = pool.allocate(512);
      if (!mine.insert(p).second && problem.empty()) problem = "the main thread got one block twice";
      for (auto& h : held)
        if (h.load(std::memory_order_relaxed) == p && problem.empty()) problem = "a block held by a thread was handed out";
      if (i % 250 == 249) pool.trim();
    }
    wait_for_pairs(pairs[0].load(std::memory_order_relaxed), pairs[1].load(std::memory_order_relaxed));
    done.store(true, std::memory_order_relaxed);
    a.join();
    b.join();
    EXPECT_EQ(problem, "");
    EXPECT_EQ(problems[0], "");
    EXPECT_EQ(problems[1], "");
    EXPECT_GE(pairs[0].load(), 2u);
    EXPECT_GE(pairs[1].load(), 2u);
    EXPECT_GE(pool.stats().hot_path_stops, 2u);  // at least the two growths of the table
    for (const device_ptr p : mine) pool.deallocate(p, 512);
    pool.validate();
    EXPECT_EQ(pool.allocated_bytes(), 0u);
    pool.trim();
    EXPECT_EQ(pool.reserved_bytes(), 0u);
  }
  dev.validate();
}

TEST(pool_stress, the_lock_holder_stops_threads_in_their_hot_path_and_they_carry_on) {
  stop_threads_in_their_hot_path(true);
}

TEST(pool_stress, the_same_without_membarrier) { stop_threads_in_their_hot_path(false); }

TEST(pool_stress, blocks_recorded_on_a_held_stream_and_freed_by_other_threads_wait_for_it) {
  // Two producers allocate 2,500 blocks each (1,000 under ThreadSanitizer) on stream 1, 512 B to 1 MiB, and
  // call record_stream(p, 2) on every other block; two consumers free what the producers pass them. Stream 2 is held throughout, so a recorded block freed by
  // a consumer must not serve any allocation until stream 2's work queued before the free completes. The
  // consumer records its own event on stream 2 just before each such free: if the pool synchronized stream 2
  // to reuse the block (when memory runs short), that event is complete too and the reuse is legitimate.
  sim_device dev(stress_device());
  {
    pool_resource pool(dev, pool_options{});
    dev.hold(2);
    struct waiting {
      std::size_t bytes;
      event_id before_free;
    };
    std::mutex waiting_mutex;
    std::map<device_ptr, waiting> waiting_blocks;  // recorded on stream 2, freed, stream 2 still held
    live_blocks live;
    std::mutex queue_mutex;
    std::deque<std::pair<block, bool>> queue;  // block, recorded on stream 2
    std::atomic<int> producers_left{2};
    std::atomic<std::uint64_t> recorded_frees{0};
    // Recorded blocks wait until the end, and the pool looks at every waiting block on its slow path: keep
    // their number modest, and smaller under ThreadSanitizer, where each of those looks takes a lock.
#ifdef VRAM_STRESS_TSAN
    constexpr int per_producer = 1'000;
#else
    constexpr int per_producer = 2'500;
#endif

    auto check_not_waiting = [&](const block& b) {
      std::lock_guard lock(waiting_mutex);
      auto it = waiting_blocks.upper_bound(b.p);
      if (it != waiting_blocks.begin()) {
        const auto prev = std::prev(it);
        if (prev->first + prev->second.bytes > b.p && !dev.event_query(prev->second.before_free)) {
          live.note("a block freed while recorded on held stream 2 was handed out again");
        }
      }
      if (it != waiting_blocks.end() && it->first < b.p + b.bytes && !dev.event_query(it->second.before_free)) {
        live.note("a block freed while recorded on held stream 2 was handed out again");
      }
    };
    auto producer = [&](int index) {
      std::mt19937_64 rng(9000 + index);
      std::uniform_real_distribution<double> exponent(9.0, 20.0);
      for (int i = 0; i < per_producer; ++i) {
        const block b{0, static_cast<std::size_t>(std::exp2(exponent(rng))), 1};
        const device_ptr p = pool.allocate(b.bytes, b.stream);
        const block got{p, b.bytes, b.stream};
        check_not_waiting(got);
        live.add(got);
        const bool record = (i % 2) == 0;
        if (record) pool.record_stream(p, 2);
        for (bool queued = false; !queued;) {
          {
            std::lock_guard lock(queue_mutex);
            if (queue.size() < 512) {
              queue.emplace_back(got, record);
              queued = true;
            }
          }
          if (!queued) std::this_thread::yield();
        }
      }
      producers_left.fetch_sub(1);
    };
    auto consumer = [&] {
      for (;;) {
        std::pair<block, bool> item;
        {
          std::lock_guard lock(queue_mutex);
          if (!queue.empty()) {
            item = queue.front();
            queue.pop_front();
          } else if (producers_left.load() == 0) {
            return;
          } else {
            item.first.p = 0;
          }
        }
        if (item.first.p == 0) {
          std::this_thread::yield();
          continue;
        }
        const auto& [b, recorded] = item;
        live.remove(b);
        if (recorded) {
          const event_id e = dev.event_create();
          dev.event_record(e, 2);
          {
            // Entries this block overlaps are older ones whose reuse was checked when this block was handed
            // out: drop them, so the map stays disjoint and a neighbour check finds every overlap.
            std::lock_guard lock(waiting_mutex);
            auto it = waiting_blocks.upper_bound(b.p);
            if (it != waiting_blocks.begin() && std::prev(it)->first + std::prev(it)->second.bytes > b.p) --it;
            while (it != waiting_blocks.end() && it->first < b.p + b.bytes) {
              dev.event_destroy(it->second.before_free);
              it = waiting_blocks.erase(it);
            }
            waiting_blocks.emplace(b.p, waiting{b.bytes, e});
          }
          recorded_frees.fetch_add(1);
        }
        pool.deallocate(b.p, b.bytes, b.stream);
      }
    };
    std::vector<std::thread> pool_threads;
    pool_threads.emplace_back(producer, 0);
    pool_threads.emplace_back(producer, 1);
    pool_threads.emplace_back(consumer);
    pool_threads.emplace_back(consumer);
    for (auto& t : pool_threads) t.join();

    EXPECT_EQ(live.problem(), "");
    EXPECT_EQ(live.size(), 0u);
    EXPECT_EQ(recorded_frees.load(), std::uint64_t{per_producer});  // every other block of 2 x per_producer
    EXPECT_EQ(pool.allocated_bytes(), 0u);
    pool.validate();
    // Stream 2's work completes; trim then gives everything back, the waiting blocks included.
    dev.release(2);
    for (const auto& [p, w] : waiting_blocks) dev.event_destroy(w.before_free);
    pool.trim();
    pool.validate();
    EXPECT_EQ(pool.reserved_bytes(), 0u);
    EXPECT_EQ(dev.used_bytes(), 0u);
  }
  dev.validate();
}

}  // namespace
}  // namespace vram
