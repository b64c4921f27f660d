// Tests of `vram bench`'s structure: list parsing and its errors, the defaults and the plan per device, the
// measuring loop's counts and error handling (with a counting fake allocator), the rows a run gives and the
// ratios derived from them, and the table and JSON. No timing is asserted: a count of pairs is used where an
// exact answer is wanted, with a time limit far above what the count takes.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "vram/measure/bench_report.hpp"
#include "vram/measure/bench_suite.hpp"
#include "vram/measure/cuda_async_target.hpp"
#include "vram/measure/host_targets.hpp"
#include "vram/measure/measure.hpp"
#include "vram/core/error.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/policies/registry.hpp"

namespace vram::measure {
namespace {

// ---- a fake allocator that counts ---------------------------------------------------------------------------

/// Counts the pairs its workers run and the threads that made them; can be told to fail.
class counting_target final : public bench_target {
 public:
  std::atomic<std::uint64_t> pairs_run{0};
  std::atomic<unsigned> workers_made{0};
  bool fail_in_timed_part = false;  // a worker throws out_of_memory on a batch of 2 or more pairs: warm-up
                                    // runs single pairs, the timed part's batches go 1, 2, 4, ...
  bool fail_to_make = false;       // make_worker throws device_error on the second call
  std::mutex mutex;
  std::set<std::thread::id> thread_ids;

  std::string_view name() const noexcept override { return "counting"; }
  std::unique_ptr<bench_worker> make_worker() override {
    const unsigned n = ++workers_made;
    {
      std::lock_guard lock(mutex);
      thread_ids.insert(std::this_thread::get_id());
    }
    if (fail_to_make && n == 2) throw device_error("counting: no worker for you");
    return std::make_unique<worker>(*this);
  }

 private:
  class worker final : public bench_worker {
   public:
    explicit worker(counting_target& t) : t_(t) {}
    std::uint64_t pairs(std::size_t bytes, std::uint64_t n) override {
      if (t_.fail_in_timed_part && n >= 2) throw out_of_memory("counting: full");
      t_.pairs_run += n;
      return bytes * n;
    }

   private:
    counting_target& t_;
  };
};

/// A plan over the counting target (baseline) and the same under another name.
bench_plan counting_plan(std::shared_ptr<counting_target> base, std::shared_ptr<counting_target> other) {
  struct forward final : bench_target {
    std::shared_ptr<counting_target> t;
    std::string name_;
    forward(std::shared_ptr<counting_target> tt, std::string n) : t(std::move(tt)), name_(std::move(n)) {}
    std::string_view name() const noexcept override { return name_; }
    std::unique_ptr<bench_worker> make_worker() override { return t->make_worker(); }
  };
  bench_plan p;
  p.sizes = {512, 4096};
  p.threads = {1, 2};
  p.seconds = 60;  // never reached: the count stops each thread first
  p.pairs = 10;
  p.baseline = "base";
  p.allocators.push_back({"base", [base] { return std::make_unique<forward>(base, "base"); }});
  p.allocators.push_back({"other", [other] { return std::make_unique<forward>(other, "other"); }});
  return p;
}

// ---- parsing and options -----------------------------------------------------------------------------------

TEST(BenchParse, SizeListTakesUnitsAndSpaces) {
  // 4K = 4 * 1024 = 4096; 64KiB = 65536; 1M = 1048576.
  EXPECT_EQ(parse_size_list("512,4K, 64KiB ,1M"), (std::vector<std::size_t>{512, 4096, 65536, 1048576}));
  EXPECT_EQ(parse_size_list("1G"), (std::vector<std::size_t>{1073741824}));
}

TEST(BenchParse, BadSizeListsAreUsageErrors) {
  for (const char* bad : {"", "512,", ",512", "512,,4K", "0", "512,0", "abc", "-1", "4Q", "1.5", "512,512", "1K,1024"}) {
    EXPECT_THROW(parse_size_list(bad), usage_error) << bad;
  }
}

TEST(BenchParse, ThreadList) {
  EXPECT_EQ(parse_thread_list("1,4,16"), (std::vector<unsigned>{1, 4, 16}));
  EXPECT_EQ(parse_thread_list("1024"), (std::vector<unsigned>{max_threads}));
  for (const char* bad : {"", "0", "1,0", "1.5", "x", "2,,3", "1025", "-2", "4 threads", "2,1,2"}) {
    EXPECT_THROW(parse_thread_list(bad), usage_error) << bad;
  }
}

TEST(BenchOptions, CheckRejectsBadValues) {
  bench_options o;
  EXPECT_NO_THROW(o.check());
  bench_options shortest;
  shortest.seconds = min_seconds;
  EXPECT_NO_THROW(shortest.check());
  for (double s : {0.0, -1.0, std::nan(""), HUGE_VAL, 1e-300, 0.000999}) {
    bench_options b;
    b.seconds = s;
    EXPECT_THROW(b.check(), usage_error) << s;
  }
  bench_options zero_size;
  zero_size.sizes = {512, 0};
  EXPECT_THROW(zero_size.check(), usage_error);
  bench_options zero_threads;
  zero_threads.threads = {0};
  EXPECT_THROW(zero_threads.check(), usage_error);
}

// The hour is the whole run's: on the simulated device, 6 sizes x 2 thread counts x 2 allocators (vram,
// glibc) = 24 cells, once each: 150 s a cell is 3600 s, allowed; 151 s is over. With the defaults (the same
// cells, 3 rounds) 50 s is 3600 s and 51 s over, though no list was given.
TEST(BenchOptions, ARunOfMoreThanAnHourInAllIsRefused) {
  sim_device dev;
  bench_options hour;
  hour.sizes = default_sizes(true);
  hour.threads = {1, 2};
  hour.repeat = 1;
  hour.seconds = 150;
  EXPECT_EQ(plan_for(dev, hour).allocators.size(), 2u);
  hour.seconds = 151;
  EXPECT_THROW(plan_for(dev, hour), usage_error);
  bench_options defaults;
  defaults.seconds = 50;
  EXPECT_NO_THROW(plan_for(dev, defaults));
  defaults.seconds = 51;
  try {
    plan_for(dev, defaults);
    ADD_FAILURE() << "a run of 3672 s was planned";
  } catch (const usage_error& e) {
    EXPECT_STREQ(e.what(), "51 s per cell over 24 cells (6 sizes x 2 thread counts x 2 allocators), 3 times, is more "
                           "than an hour; lower --seconds or --repeat, or measure fewer cells");
  }
}

TEST(BenchDefaults, PerDeviceKind) {
  EXPECT_EQ(default_sizes(true), (std::vector<std::size_t>{512, 4 * KiB, 64 * KiB, MiB, 8 * MiB, 64 * MiB}));
  EXPECT_EQ(default_sizes(false),
            (std::vector<std::size_t>{512, 4 * KiB, 64 * KiB, MiB, 8 * MiB, 64 * MiB, 256 * MiB, GiB}));
  EXPECT_EQ(default_threads(true), (std::vector<unsigned>{1, 2}));
  EXPECT_EQ(default_threads(false), (std::vector<unsigned>{1, 4, 16}));
}

TEST(BenchLabels, SizesAndRates) {
  EXPECT_EQ(size_label(512), "512 B");
  EXPECT_EQ(size_label(1536), "1536 B");  // 1.5 KiB: not a whole number of KiB
  EXPECT_EQ(size_label(4096), "4 KiB");
  EXPECT_EQ(size_label(3 * MiB), "3 MiB");
  EXPECT_EQ(size_label(GiB), "1 GiB");
  EXPECT_EQ(size_label(1536 * GiB), "1536 GiB");  // 1.5 TiB
  EXPECT_EQ(size_label(16 * 1024 * GiB), "16 TiB");
  EXPECT_EQ(rate_label(1.234e9), "1.23 G");
  EXPECT_EQ(rate_label(45.64e6), "45.6 M");
  EXPECT_EQ(rate_label(789.2e3), "789 k");
  EXPECT_EQ(rate_label(12.34), "12.3");
  EXPECT_EQ(rate_label(std::nan("")), "-");
}

// ---- the plan ----------------------------------------------------------------------------------------------

TEST(BenchPlan, SimulatedDeviceRunsVramAgainstGlibc) {
  sim_device dev;
  const bench_plan p = plan_for(dev, bench_options{});
  EXPECT_EQ(p.baseline, "glibc");
  ASSERT_EQ(p.allocators.size(), 2u);
  EXPECT_EQ(p.allocators[0].name, "vram");
  EXPECT_EQ(p.allocators[1].name, "glibc");
  EXPECT_EQ(p.sizes, default_sizes(true));
  EXPECT_EQ(p.threads, default_threads(true));
  EXPECT_EQ(p.seconds, 0.2);
  // The factories make what they are named.
  for (const auto& a : p.allocators) EXPECT_EQ(a.make()->name(), a.name);
}

TEST(BenchPlan, GivenListsReplaceDefaults) {
  sim_device dev;
  bench_options o;
  o.sizes = {4096};
  o.threads = {3};
  o.seconds = 0.5;
  o.pairs = 7;
  const bench_plan p = plan_for(dev, o);
  EXPECT_EQ(p.sizes, (std::vector<std::size_t>{4096}));
  EXPECT_EQ(p.threads, (std::vector<unsigned>{3}));
  EXPECT_EQ(p.seconds, 0.5);
  EXPECT_EQ(p.pairs, 7u);
  o.seconds = -1;
  EXPECT_THROW(plan_for(dev, o), usage_error);
}

TEST(BenchTargets, CudaMallocAsyncNeedsACudaDevice) {
  sim_device dev;
  EXPECT_THROW(make_cuda_async_target(dev), usage_error);
}

TEST(BenchTargets, AGuardedResourceSaysSoAndAConcurrentOneSaysNothing) {
  sim_device dev;
  auto guarded = make_resource_target("torch-native", make_resource("torch-native", dev), sharing::mutex);
  EXPECT_NE(guarded->note().find("torch-native is not thread-safe"), std::string::npos);
  EXPECT_NE(guarded->note().find("mutex"), std::string::npos);
  auto free_running = make_resource_target("vram", make_resource("vram", dev), sharing::concurrent);
  EXPECT_EQ(free_running->note(), "");
  // One pair each through the worker: the blocks come back, so nothing stays allocated.
  auto w = guarded->make_worker();
  EXPECT_NE(w->pairs(4096, 3), 0u);
}

// ---- the measuring loop ------------------------------------------------------------------------------------

TEST(BenchMeasure, CountsExactlyWithACount) {
  counting_target t;
  cell_options o;
  o.bytes = 512;
  o.threads = 3;
  o.seconds = 60;  // the count stops first
  o.max_pairs = 100;
  o.warmup_pairs = 16;
  o.warmup_seconds = 60;
  const cell_result r = measure_cell(t, o);
  ASSERT_EQ(r.threads.size(), 3u);
  for (const auto& f : r.threads) {
    EXPECT_EQ(f.pairs, 100u);  // batches 1, 2, 4, ... never run past the count
    EXPECT_GT(f.seconds, 0.0);
  }
  EXPECT_EQ(r.pairs(), 300u);
  // Warm-up 16 pairs and 100 timed, on each of 3 threads: 3 * (16 + 100) = 348.
  EXPECT_EQ(t.pairs_run.load(), 348u);
  EXPECT_EQ(t.workers_made.load(), 3u);
  EXPECT_EQ(t.thread_ids.size(), 3u);  // each worker made on its own thread
  EXPECT_FALSE(t.thread_ids.count(std::this_thread::get_id()));
  EXPECT_NO_THROW(r.validate());
  EXPECT_GT(r.ns_per_pair(), 0.0);
  EXPECT_GT(r.pairs_per_second(), 0.0);
  for (const auto& f : r.threads) EXPECT_GE(f.cpu_seconds, 0.0);
}

TEST(BenchMeasure, FiguresFromThreadCounts) {
  // Thread 0: 100 pairs in 1 s; thread 1: 300 pairs in 2 s.
  // ns/pair = (1 + 2) s / 400 pairs = 7.5 ms = 7.5e6 ns; pairs/s = 100/1 + 300/2 = 250.
  cell_result r;
  r.threads = {{100, 1.0}, {300, 2.0}};
  EXPECT_EQ(r.pairs(), 400u);
  EXPECT_DOUBLE_EQ(r.ns_per_pair(), 7.5e6);
  EXPECT_DOUBLE_EQ(r.pairs_per_second(), 250.0);
  // CPU 0.5 s and 1.5 s: cpu ns/pair = 2 s / 400 = 5e6 ns; cpu share = 2 s / 3 s.
  r.threads[0].cpu_seconds = 0.5;
  r.threads[1].cpu_seconds = 1.5;
  EXPECT_DOUBLE_EQ(r.cpu_ns_per_pair(), 5e6);
  EXPECT_DOUBLE_EQ(r.cpu_share(), 2.0 / 3.0);
  r.threads[1].pairs = 0;
  EXPECT_THROW(r.validate(), invariant_error);
  r.threads[1] = {5, 0.0};
  EXPECT_THROW(r.validate(), invariant_error);
  EXPECT_THROW(cell_result{}.validate(), invariant_error);
}

TEST(BenchMeasure, AWorkerThatFailsIsRethrownAfterAllStop) {
  counting_target t;
  t.fail_in_timed_part = true;
  cell_options o;
  o.threads = 2;
  o.seconds = 60;
  o.max_pairs = 1000;
  o.warmup_pairs = 4;
  EXPECT_THROW(measure_cell(t, o), out_of_memory);
}

TEST(BenchMeasure, AWorkerThatCannotBeMadeDoesNotHangTheOthers) {
  counting_target t;
  t.fail_to_make = true;
  cell_options o;
  o.threads = 3;
  o.seconds = 60;
  o.max_pairs = 50;
  EXPECT_THROW(measure_cell(t, o), device_error);
  EXPECT_EQ(t.workers_made.load(), 3u);
}

// ---- a run's rows ------------------------------------------------------------------------------------------

TEST(BenchRun, RowsInPlanOrderWithRatiosAndScaling) {
  auto base = std::make_shared<counting_target>();
  auto other = std::make_shared<counting_target>();
  sim_device dev;
  std::vector<std::string> cells;
  const bench_result r = run_bench(dev, counting_plan(base, other), [&](std::size_t done, std::size_t total,
                                                                        const std::string& cell) {
    EXPECT_EQ(done, cells.size());
    EXPECT_EQ(total, 8u);
    cells.push_back(cell);
  });
  // 2 sizes x 2 thread counts x 2 allocators = 8 rows, sizes outermost, allocators innermost.
  ASSERT_EQ(r.rows.size(), 8u);
  EXPECT_EQ(cells.front(), "base 512 B x 1");
  EXPECT_EQ(cells.back(), "other 4 KiB x 2");
  const char* order[8][3] = {{"base", "512", "1"},  {"other", "512", "1"},  {"base", "512", "2"},
                             {"other", "512", "2"}, {"base", "4096", "1"}, {"other", "4096", "1"},
                             {"base", "4096", "2"}, {"other", "4096", "2"}};
  for (std::size_t i = 0; i < 8; ++i) {
    const bench_row& row = r.rows[i];
    EXPECT_EQ(row.allocator, order[i][0]);
    EXPECT_EQ(std::to_string(row.bytes), order[i][1]);
    EXPECT_EQ(std::to_string(row.threads), order[i][2]);
    EXPECT_EQ(row.pairs, 10u * row.threads);  // the count: 10 per thread
    EXPECT_TRUE(row.error.empty());
    EXPECT_GT(row.pairs_per_second, 0.0);
    if (row.allocator == "base") EXPECT_DOUBLE_EQ(row.ratio, 1.0);
    if (row.threads == 1) EXPECT_DOUBLE_EQ(row.scaling, 1.0);
  }
  // Each target: 4 cells; timed 10 per thread: (1 + 2) threads x 2 sizes x 10 = 60. Warm-up adds 1 to 16
  // per thread (it also stops after 0.05 s): from 6 to 96 more.
  for (const auto* t : {base.get(), other.get()}) {
    EXPECT_GE(t->pairs_run.load(), 66u);
    EXPECT_LE(t->pairs_run.load(), 156u);
  }
  EXPECT_EQ(r.baseline, "base");
  EXPECT_EQ(r.allocators, (std::vector<std::string>{"base", "other"}));
  EXPECT_EQ(r.date.size(), 20u);  // 2026-12-02T16:00:00Z
  EXPECT_EQ(r.date.back(), 'Z');
  EXPECT_NO_THROW(r.validate());
}

TEST(BenchRun, AFailedCellGivesAnErrorRowAndTheRunGoesOn) {
  auto base = std::make_shared<counting_target>();
  auto other = std::make_shared<counting_target>();
  other->fail_in_timed_part = true;  // every cell of `other` fails at its second batch
  sim_device dev;
  const bench_result r = run_bench(dev, counting_plan(base, other));
  ASSERT_EQ(r.rows.size(), 8u);
  std::size_t failed = 0;
  for (const auto& row : r.rows) {
    if (row.allocator == "base") {
      EXPECT_TRUE(row.error.empty());
      continue;
    }
    EXPECT_EQ(row.error, "counting: full");
    EXPECT_TRUE(std::isnan(row.ns_per_pair));
    EXPECT_TRUE(std::isnan(row.pairs_per_second));
    EXPECT_TRUE(std::isnan(row.ratio));
    EXPECT_TRUE(std::isnan(row.scaling));
    EXPECT_TRUE(std::isnan(row.cpu_ns_per_pair));
    ++failed;
  }
  EXPECT_EQ(failed, 4u);
  EXPECT_NO_THROW(r.validate());
  const nlohmann::json j = to_json(r);
  EXPECT_TRUE(j["rows"][1]["ns_per_pair"].is_null());
  EXPECT_EQ(j["rows"][1]["error"], "counting: full");
  EXPECT_FALSE(j["rows"][0].contains("error"));
  EXPECT_NE(format_table(r).find("failed: other 512 B x 1: counting: full"), std::string::npos);
}

TEST(BenchRun, SimulatedDeviceEndToEnd) {
  sim_device dev;
  bench_options o;
  o.sizes = {512, 64 * KiB};
  o.threads = {1, 2};
  o.seconds = 60;
  o.pairs = 50;
  const bench_result r = run_bench(dev, plan_for(dev, o));
  ASSERT_EQ(r.rows.size(), 8u);
  for (const auto& row : r.rows) {
    EXPECT_TRUE(row.error.empty()) << row.error;
    EXPECT_EQ(row.pairs, 50u * row.threads);
  }
  EXPECT_TRUE(r.simulated);
  EXPECT_EQ(r.baseline, "glibc");
  EXPECT_NO_THROW(r.validate());
  EXPECT_EQ(dev.used_bytes(), 0u);  // every cell's pool gave back all it held
}

TEST(BenchRun, RepeatedCellsRunInRoundsAndKeepTheMedianRun) {
  auto base = std::make_shared<counting_target>();
  auto other = std::make_shared<counting_target>();
  sim_device dev;
  bench_plan p = counting_plan(base, other);
  p.repeat = 3;
  std::vector<std::string> cells;
  const bench_result r = run_bench(dev, p, [&](std::size_t done, std::size_t total, const std::string& cell) {
    EXPECT_EQ(done, cells.size());
    EXPECT_EQ(total, 24u);  // 8 cells x 3 rounds
    cells.push_back(cell);
  });
  ASSERT_EQ(cells.size(), 24u);
  // Round by round: every cell once, then again.
  EXPECT_EQ(cells[0], "base 512 B x 1, round 1/3");
  EXPECT_EQ(cells[7], "other 4 KiB x 2, round 1/3");
  EXPECT_EQ(cells[8], "base 512 B x 1, round 2/3");
  EXPECT_EQ(cells[23], "other 4 KiB x 2, round 3/3");
  EXPECT_EQ(r.repeat, 3u);
  ASSERT_EQ(r.rows.size(), 8u);  // one row a cell
  // Each cell: one worker a thread a round; 10 timed pairs a thread.
  // base: (1 + 2 threads) x 2 sizes x 3 rounds = 18 workers.
  EXPECT_EQ(base->workers_made.load(), 18u);
  for (const auto& row : r.rows) EXPECT_EQ(row.pairs, 10u * row.threads);
  EXPECT_NO_THROW(r.validate());
  EXPECT_EQ(to_json(r)["repeat"], 3);
  EXPECT_NE(format_table(r).find("every cell ran 3 times"), std::string::npos);
}

TEST(BenchResult, TheMedianRunIsAWholeRunAndAFailureWins) {
  auto run = [](double pps, double cpu) {
    bench_row x;
    x.allocator = "v";
    x.bytes = 512;
    x.threads = 1;
    x.pairs = 1;
    x.pairs_per_second = pps;
    x.cpu_ns_per_pair = cpu;
    return x;
  };
  // pairs/s 30, 10, 20: the median is 20, with its own CPU figure (2), not another run's.
  bench_row m = median_run({run(30, 3), run(10, 1), run(20, 2)});
  EXPECT_EQ(m.pairs_per_second, 20);
  EXPECT_EQ(m.cpu_ns_per_pair, 2);
  // Four runs: the lower middle one (20 of 10, 20, 30, 40).
  EXPECT_EQ(median_run({run(40, 4), run(10, 1), run(30, 3), run(20, 2)}).pairs_per_second, 20);
  EXPECT_EQ(median_run({run(7, 7)}).pairs_per_second, 7);
  bench_row failed = run(0, 0);
  failed.error = "full";
  EXPECT_EQ(median_run({run(30, 3), failed, run(20, 2)}).error, "full");
  EXPECT_THROW(median_run({}), invariant_error);
}

TEST(BenchPlan, RepeatDefaultsByDeviceAndIsChecked) {
  sim_device dev;
  EXPECT_EQ(plan_for(dev, bench_options{}).repeat, 3u);
  EXPECT_EQ(default_repeat(false), 1u);
  bench_options o;
  o.repeat = 5;
  EXPECT_EQ(plan_for(dev, o).repeat, 5u);
  o.repeat = max_repeat + 1;
  EXPECT_THROW(plan_for(dev, o), usage_error);
  // An hour in all counts the rounds: one size, one thread count, 2 allocators: 350 s x 2 cells x 5 rounds =
  // 3500 s passes, x 6 = 4200 s does not.
  bench_options hour;
  hour.sizes = {512};
  hour.threads = {1};
  hour.seconds = 350;
  hour.repeat = 5;
  EXPECT_NO_THROW(plan_for(dev, hour));
  hour.repeat = 6;
  EXPECT_THROW(plan_for(dev, hour), usage_error);
}

TEST(BenchResult, DeriveRatiosByHand) {
  bench_result r;
  r.baseline = "b";
  r.sizes = {512};
  r.threads = {1, 2};
  r.allocators = {"v", "b"};
  auto row = [](std::string a, unsigned t, double pps) {
    bench_row x;
    x.allocator = std::move(a);
    x.bytes = 512;
    x.threads = t;
    x.pairs = 1;
    x.pairs_per_second = pps;
    return x;
  };
  r.rows = {row("v", 1, 50), row("b", 1, 100), row("v", 2, 200), row("b", 2, 150)};
  derive_ratios(r);
  EXPECT_DOUBLE_EQ(r.rows[0].ratio, 0.5);          // 50 / 100
  EXPECT_DOUBLE_EQ(r.rows[2].ratio, 200.0 / 150);  // 1.333...
  EXPECT_DOUBLE_EQ(r.rows[3].ratio, 1.0);
  EXPECT_DOUBLE_EQ(r.rows[2].scaling, 4.0);  // 200 / 50
  EXPECT_DOUBLE_EQ(r.rows[3].scaling, 1.5);  // 150 / 100
  EXPECT_NO_THROW(r.validate());

  bench_result wrong = r;
  wrong.rows[2].ratio = 2.0;
  EXPECT_THROW(wrong.validate(), invariant_error);
  bench_result swapped = r;
  std::swap(swapped.rows[0], swapped.rows[1]);
  EXPECT_THROW(swapped.validate(), invariant_error);
  bench_result missing = r;
  missing.rows.pop_back();
  EXPECT_THROW(missing.validate(), invariant_error);

  // Without a 1-thread row, scaling cannot be had.
  bench_result no_one = r;
  no_one.threads = {2};
  no_one.rows = {r.rows[2], r.rows[3]};
  derive_ratios(no_one);
  EXPECT_TRUE(std::isnan(no_one.rows[0].scaling));
  EXPECT_DOUBLE_EQ(no_one.rows[0].ratio, 200.0 / 150);
}

TEST(BenchReport, JsonKeysAndTable) {
  auto base = std::make_shared<counting_target>();
  auto other = std::make_shared<counting_target>();
  sim_device dev;
  bench_result r = run_bench(dev, counting_plan(base, other));
  r.command = "vram bench --pairs 10";
  const nlohmann::json j = to_json(r);
  for (const char* key : {"device", "simulated", "date", "command", "baseline", "seconds_per_cell", "pairs_per_thread",
                          "sizes", "threads", "allocators", "notes", "rows"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["command"], "vram bench --pairs 10");
  EXPECT_EQ(j["pairs_per_thread"], 10);
  ASSERT_EQ(j["rows"].size(), 8u);
  for (const char* key : {"allocator", "size", "threads", "pairs", "seconds", "ns_per_pair", "pairs_per_second",
                          "cpu_ns_per_pair", "cpu_share", "ratio", "ratio_to", "scaling"}) {
    EXPECT_TRUE(j["rows"][0].contains(key)) << key;
  }
  EXPECT_EQ(j["rows"][3]["allocator"], "other");
  EXPECT_EQ(j["rows"][3]["size"], 512);
  EXPECT_EQ(j["rows"][3]["threads"], 2);
  EXPECT_EQ(j["rows"][3]["pairs"], 20);
  EXPECT_EQ(j["rows"][3]["ratio_to"], "base");

  const std::string table = format_table(r);
  EXPECT_NE(table.find("ns/pair"), std::string::npos);
  EXPECT_NE(table.find("ratio: pairs/s over base's"), std::string::npos);
  EXPECT_NE(table.find("or 10 pairs"), std::string::npos);
  EXPECT_EQ(table.find("failed:"), std::string::npos);
  // Header plus 8 rows; the time-and-count line and the others.
  std::size_t lines = 0;
  for (char c : table) lines += c == '\n';
  // 4 heading lines, 1 blank, 1 header, 8 rows, 1 blank and 1 note (the simulated device's).
  EXPECT_EQ(lines, 16u);
}

}  // namespace
}  // namespace vram::measure
