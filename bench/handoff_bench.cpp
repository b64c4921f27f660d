// A training loop's allocations on the two threads PyTorch makes them on: the forward pass (and the optimizer)
// on the program's thread, the backward pass on autograd's device thread, which frees the activations the
// forward pass allocated. The recorded cnn_train loop (examples/traces/cnn_train.vram.gz, 33 steps) is cut
// where PyTorch would change threads: the backward pass starts at each peak of the bytes live and ends where
// they are back near their low (a rule of thumb over the recording, which names no thread). Each iteration
// replays the whole recording against one pool on the simulated device, then frees what is still live, so
// after the first the pool holds its working set, as a long run would.
//
//   one_thread   every call on one thread: the pool's per-thread caches always serve the thread that freed
//   two_threads  the phases alternate between two threads, handing over through an atomic (spinning); blocks
//                freed by one thread and wanted by the other miss the caches, and a large request that misses
//                takes the other thread's large blocks back, stopping the hot path
//
// Allocators: vram; vram without its per-thread caches (thread_cache=0, VRAM_THREAD_CACHE=0); and the
// emulation of PyTorch's caching allocator, which has no lock of its own (the threads never overlap here, the
// handover orders them), for the cost of moving the same work between threads with no thread cache at all.
// Counters, per replayed step: calls, hot_path_stops (vram's count), handovers; items/s are calls per second;
// reserved_mib, what the allocator holds after the last replay.
// Compare two_threads with one_thread of the same allocator, in one run.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vram/device/sim_device.hpp"
#include "vram/policies/registry.hpp"
#include "vram/resource/memory_resource.hpp"
#include "vram/trace/trace_io.hpp"

namespace {

struct call {
  std::uint32_t slot;  // where the replay keeps the block: one per live block, reused once it is freed
  bool alloc;
  std::uint64_t size;  // bytes, for an allocation and its free
  std::int64_t time_us;  // when the recording made it
};

struct phased_trace {
  std::vector<call> calls;
  std::vector<std::size_t> cuts;  // calls[cuts[i]] starts phase i + 1; even phases on the first thread
  std::size_t steps = 0;          // backward passes
  std::size_t slots = 0;
  std::int64_t span_us = 0;  // from the first call to the last
};

// The recording cut into phases, as described at the top.
const phased_trace& cnn_train() {
  static const phased_trace t = [] {
    phased_trace p;
    const std::string path = std::string(VRAM_SOURCE_DIR) + "/examples/traces/cnn_train.vram.gz";
    if (!std::filesystem::exists(path)) return p;
    const vram::trace tr = vram::read_trace(path);
    std::unordered_map<std::uint64_t, call> by_address;  // live blocks: their slot and size
    std::vector<std::uint32_t> free_slots;
    std::vector<std::int64_t> live_after;
    std::int64_t live = 0;
    for (const auto& e : tr.events) {
      if (e.action == vram::trace_action::alloc) {
        std::uint32_t slot = static_cast<std::uint32_t>(p.slots);
        if (free_slots.empty()) ++p.slots;
        else slot = free_slots.back(), free_slots.pop_back();
        by_address[e.addr] = {slot, false, e.size};
        p.calls.push_back({slot, true, e.size, e.time_us});
        live += static_cast<std::int64_t>(e.size);
      } else if (e.action == vram::trace_action::free_requested) {
        const auto it = by_address.find(e.addr);
        if (it == by_address.end()) continue;
        p.calls.push_back({it->second.slot, false, it->second.size, e.time_us});
        free_slots.push_back(it->second.slot);
        live -= static_cast<std::int64_t>(it->second.size);
        by_address.erase(it);
      } else {
        continue;
      }
      live_after.push_back(live);
    }
    std::int64_t low = live_after.empty() ? 0 : live_after.back(), high = 0;
    for (auto v : live_after) high = std::max(high, v);
    for (std::size_t i = live_after.size() / 2; i < live_after.size(); ++i) low = std::min(low, live_after[i]);
    const std::int64_t up = low + (high - low) / 2, down = low + (high - low) / 10;
    // A backward pass: from the largest figure of an excursion above `up` to the first one at or below `down`.
    std::size_t i = 0;
    const std::size_t n = live_after.size();
    while (i < n) {
      while (i < n && live_after[i] <= up) ++i;
      if (i == n) break;
      std::size_t top = i;
      while (i < n && live_after[i] > down) {
        if (live_after[i] > live_after[top]) top = i;
        ++i;
      }
      p.cuts.push_back(top + 1);
      p.cuts.push_back(i < n ? i + 1 : n);
      ++p.steps;
    }
    if (!p.calls.empty()) p.span_us = p.calls.back().time_us - p.calls.front().time_us;
    return p;
  }();
  return t;
}

// One allocator on its own simulated device, and the blocks a replay holds.
struct replayer {
  explicit replayer(const char* policy) : resource(vram::make_resource(policy, dev)), pool(*resource) {}

  vram::sim_device dev;
  std::unique_ptr<vram::memory_resource> resource;
  vram::memory_resource& pool;
  std::vector<std::pair<vram::device_ptr, std::uint64_t>> live;  // by slot: the block and its size, or 0
  std::int64_t start_us = 0;  // the device's time of the current replay's first call

  // The device's time is the recording's, as in a replay (each whole replay after the last), so the pool
  // sees the pace of the program, not that of this loop.
  void run(const phased_trace& t, std::size_t from, std::size_t to) {
    if (live.size() < t.slots) live.resize(t.slots, {0, 0});
    for (std::size_t k = from; k < to; ++k) {
      const call& c = t.calls[k];
      dev.set_time((start_us + c.time_us - t.calls.front().time_us) * 1000);
      if (c.alloc) {
        live[c.slot] = {pool.allocate(c.size), c.size};
      } else {
        pool.deallocate(live[c.slot].first, c.size);
        live[c.slot] = {0, 0};
      }
    }
  }
  void free_all(const phased_trace& t) {
    for (auto& [p, size] : live)
      if (p != 0) pool.deallocate(p, size), p = 0;
    start_us += t.span_us + 1000;
  }
};

std::uint64_t stops_of(const vram::memory_resource& r) {
  for (const auto& [name, value] : r.counters())
    if (name == "hot_path_stops") return value;
  return 0;
}

void set_counters(benchmark::State& state, const phased_trace& t, std::uint64_t stops, std::uint64_t handovers,
                  const vram::memory_resource& pool) {
  const double replays = static_cast<double>(state.iterations());
  const double steps = replays * static_cast<double>(t.steps);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * t.calls.size()));
  state.counters["calls_per_step"] = static_cast<double>(t.calls.size()) / static_cast<double>(t.steps);
  state.counters["stops_per_step"] = static_cast<double>(stops) / steps;
  state.counters["handovers_per_step"] = static_cast<double>(handovers) / steps;
  state.counters["reserved_mib"] = static_cast<double>(pool.reserved_bytes()) / static_cast<double>(1 << 20);
}

void BM_cnn_train_one_thread(benchmark::State& state, const char* policy) {
  const phased_trace& t = cnn_train();
  if (t.steps == 0) return state.SkipWithError("no examples/traces/cnn_train.vram.gz");
  replayer r(policy);
  r.run(t, 0, t.calls.size());  // warm-up: the pool grows to the working set
  r.free_all(t);
  const std::uint64_t stops0 = stops_of(r.pool);
  for (auto _ : state) {
    r.run(t, 0, t.calls.size());
    r.free_all(t);
  }
  set_counters(state, t, stops_of(r.pool) - stops0, 0, r.pool);
}

void BM_cnn_train_two_threads(benchmark::State& state, const char* policy) {
  const phased_trace& t = cnn_train();
  if (t.steps == 0) return state.SkipWithError("no examples/traces/cnn_train.vram.gz");
  replayer r(policy);
  // Phase boundaries: [0, cuts[0]), [cuts[0], cuts[1]), ..., [cuts.back(), calls.size()).
  std::vector<std::size_t> bounds{0};
  bounds.insert(bounds.end(), t.cuts.begin(), t.cuts.end());
  bounds.push_back(t.calls.size());
  // turn: odd k asks the second thread to run phase k, which answers k + 1; -1 stops it.
  std::atomic<long> turn{0};
  std::thread autograd([&] {
    for (;;) {
      long k = turn.load(std::memory_order_acquire);
      while (k >= 0 && k % 2 == 0) {
        std::this_thread::yield();
        k = turn.load(std::memory_order_acquire);
      }
      if (k < 0) return;
      r.run(t, bounds[static_cast<std::size_t>(k)], bounds[static_cast<std::size_t>(k) + 1]);
      turn.store(k + 1, std::memory_order_release);
    }
  });
  const long phases = static_cast<long>(bounds.size()) - 1;
  auto replay_once = [&] {
    for (long k = 0; k < phases; ++k) {
      if (k % 2 == 0) {
        r.run(t, bounds[static_cast<std::size_t>(k)], bounds[static_cast<std::size_t>(k) + 1]);
      } else {
        turn.store(k, std::memory_order_release);
        while (turn.load(std::memory_order_acquire) != k + 1) std::this_thread::yield();
      }
    }
    r.free_all(t);
  };
  replay_once();  // warm-up
  const std::uint64_t stops0 = stops_of(r.pool);
  for (auto _ : state) replay_once();
  const std::uint64_t stops = stops_of(r.pool) - stops0;
  turn.store(-1, std::memory_order_release);
  autograd.join();
  // Two handovers for each phase of the second thread's.
  set_counters(state, t, stops, static_cast<std::uint64_t>(state.iterations()) * static_cast<std::uint64_t>(phases / 2) * 2,
               r.pool);
}

}  // namespace

BENCHMARK_CAPTURE(BM_cnn_train_one_thread, vram, "vram")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_cnn_train_two_threads, vram, "vram")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_cnn_train_one_thread, vram_no_thread_cache, "vram:thread_cache=0")
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_cnn_train_two_threads, vram_no_thread_cache, "vram:thread_cache=0")
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_cnn_train_one_thread, torch_native, "torch-native")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_cnn_train_two_threads, torch_native, "torch-native")->Unit(benchmark::kMillisecond)->UseRealTime();
