// The run of `vram bench`: defaults, list parsing, the plan per device and the rows (bench_suite.hpp).
// Decisions:
//  - A fresh allocator per cell (made before the cell's threads start, destroyed after they stop), so a
//    cell's figures are its own; the cost of making it is not timed.
//  - Only vram's own errors (out of memory, driver errors) turn a cell into a row with an error; anything
//    else (a bug) stops the run.
//  - Ratios and scaling are derived after all cells ran, from the rows alone (derive_ratios), so a row's
//    figures and the table and JSON made from them never disagree.
#include "vram/measure/bench_suite.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "vram/measure/cuda_async_target.hpp"
#include "vram/measure/host_targets.hpp"
#include "vram/measure/measure.hpp"
#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/device.hpp"
#include "vram/pool/pool_resource.hpp"
#include "vram/policies/registry.hpp"

namespace vram::measure {

namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// A glibc thread on the CPU less than this share of its time, at several threads, means a busy machine.
constexpr double busy_share = 0.9;

/// @brief Splits "a,b,c" into its items; @throws usage_error for an empty list or item.
std::vector<std::string_view> split_list(std::string_view list, std::string_view what) {
  if (list.empty()) throw usage_error(fmt::format("empty list of {}", what));
  std::vector<std::string_view> items;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = list.find(',', begin);
    std::string_view item = list.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) throw usage_error(fmt::format("empty item in the list of {} '{}'", what, list));
    items.push_back(item);
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  return items;
}

std::string utc_now() {
  const auto now = std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now());
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", now);
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

// ---- options ------------------------------------------------------------------------------------------------

void bench_options::check() const {
  for (std::size_t s : sizes) {
    if (s == 0) throw usage_error("a block size of 0 bytes cannot be measured (allocate(0) does nothing)");
  }
  for (unsigned t : threads) {
    if (t == 0 || t > max_threads) {
      throw usage_error(fmt::format("bad thread count {}: from 1 to {}", t, max_threads));
    }
  }
  if (repeat > max_repeat) throw usage_error(fmt::format("bad --repeat {}: from 1 to {}", repeat, max_repeat));
  if (!(seconds >= min_seconds) || !std::isfinite(seconds)) {
    throw usage_error(fmt::format("bad time per cell {}: a number of seconds from {}, e.g. 0.2", seconds, min_seconds));
  }
}

std::vector<std::size_t> default_sizes(bool simulated) {
  std::vector<std::size_t> s{512, 4 * KiB, 64 * KiB, 1 * MiB, 8 * MiB, 64 * MiB};
  if (!simulated) {
    s.push_back(256 * MiB);
    s.push_back(1 * GiB);
  }
  return s;
}

unsigned default_repeat(bool simulated) { return simulated ? 3 : 1; }

std::vector<unsigned> default_threads(bool simulated) {
  if (simulated) return {1, 2};
  return {1, 4, 16};
}

std::vector<std::size_t> parse_size_list(std::string_view list) {
  std::vector<std::size_t> sizes;
  for (std::string_view item : split_list(list, "sizes")) {
    const std::size_t s = parse_size(item);
    if (s == 0) throw usage_error(fmt::format("bad size '{}' in '{}': a block of 0 bytes cannot be measured", item, list));
    if (std::find(sizes.begin(), sizes.end(), s) != sizes.end())
      throw usage_error(fmt::format("size '{}' in '{}' is there twice: each size is measured once", item, list));
    sizes.push_back(s);
  }
  return sizes;
}

std::vector<unsigned> parse_thread_list(std::string_view list) {
  std::vector<unsigned> threads;
  for (std::string_view item : split_list(list, "thread counts")) {
    unsigned n = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (ec != std::errc{} || end != item.data() + item.size() || n == 0 || n > max_threads) {
      throw usage_error(fmt::format("bad thread count '{}' in '{}': a whole number from 1 to {}", item, list, max_threads));
    }
    if (std::find(threads.begin(), threads.end(), n) != threads.end())
      throw usage_error(fmt::format("thread count '{}' in '{}' is there twice: each count is measured once", item, list));
    threads.push_back(n);
  }
  return threads;
}

std::string size_label(std::size_t bytes) {
  if (bytes != 0 && bytes % (1024 * GiB) == 0) return fmt::format("{} TiB", bytes / (1024 * GiB));
  if (bytes != 0 && bytes % GiB == 0) return fmt::format("{} GiB", bytes / GiB);
  if (bytes != 0 && bytes % MiB == 0) return fmt::format("{} MiB", bytes / MiB);
  if (bytes != 0 && bytes % KiB == 0) return fmt::format("{} KiB", bytes / KiB);
  return fmt::format("{} B", bytes);
}

// ---- the plan -----------------------------------------------------------------------------------------------

bench_plan plan_for(device& dev, const bench_options& o) {
  o.check();
  bench_plan p;
  const bool sim = dev.simulated();
  p.sizes = o.sizes.empty() ? default_sizes(sim) : o.sizes;
  p.threads = o.threads.empty() ? default_threads(sim) : o.threads;
  p.seconds = o.seconds;
  p.pairs = o.pairs;
  p.repeat = o.repeat == 0 ? default_repeat(sim) : o.repeat;
  device* d = &dev;
  auto vram_pool = [d] {
    return make_resource_target("vram", std::make_unique<pool_resource>(*d), sharing::concurrent);
  };
  if (sim) {
    p.baseline = "glibc";
    p.allocators.push_back({"vram", vram_pool});
    p.allocators.push_back({"glibc", [] { return make_glibc_target(); }});
  } else {
    p.baseline = "cudaMallocAsync";
    p.allocators.push_back({"cudaMalloc", [d] { return make_legacy_target("cudaMalloc", *d); }});
    p.allocators.push_back({"cudaMallocAsync", [d] { return make_cuda_async_target(*d); }});
    p.allocators.push_back({"vram", vram_pool});
    p.allocators.push_back({"torch-native", [d] {
                              return make_resource_target("torch-native", make_resource("torch-native", *d),
                                                          sharing::mutex);
                            }});
  }
  // The whole run, with the device's defaults and every allocator: its timed part alone past an hour is refused.
  const std::size_t cells = p.sizes.size() * p.threads.size() * p.allocators.size();
  if (p.seconds * static_cast<double>(cells) * p.repeat > 3600) {
    auto many = [](std::size_t n, std::string_view what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); };
    throw usage_error(fmt::format("{} s per cell over {} ({} x {} x {}), {}, is more than an hour; lower --seconds or "
                                  "--repeat, or measure fewer cells",
                                  p.seconds, many(cells, "cell"), many(p.sizes.size(), "size"),
                                  many(p.threads.size(), "thread count"), many(p.allocators.size(), "allocator"),
                                  p.repeat == 1 ? std::string("once") : many(p.repeat, "time")));
  }
  return p;
}

// ---- the rows -----------------------------------------------------------------------------------------------

const bench_row* bench_result::find(std::string_view allocator, std::size_t bytes, unsigned t) const {
  for (const auto& r : rows) {
    if (r.allocator == allocator && r.bytes == bytes && r.threads == t) return &r;
  }
  return nullptr;
}

void derive_ratios(bench_result& r) {
  auto rate = [&](std::string_view allocator, std::size_t bytes, unsigned t) {
    const bench_row* row = r.find(allocator, bytes, t);
    return row == nullptr || !row->error.empty() || !(row->pairs_per_second > 0) ? nan : row->pairs_per_second;
  };
  for (auto& row : r.rows) {
    if (!row.error.empty()) {
      row.ratio = row.scaling = nan;
      continue;
    }
    row.ratio = row.pairs_per_second / rate(r.baseline, row.bytes, row.threads);
    row.scaling = row.pairs_per_second / rate(row.allocator, row.bytes, 1);
  }
}

void bench_result::validate() const {
  const std::size_t cells = sizes.size() * threads.size() * allocators.size();
  if (rows.size() != cells) {
    throw invariant_error(fmt::format("bench result: {} rows for {} cells (sizes x threads x allocators)", rows.size(), cells));
  }
  std::size_t i = 0;
  for (std::size_t s : sizes) {
    for (unsigned t : threads) {
      for (const auto& a : allocators) {
        const bench_row& row = rows[i++];
        if (row.allocator != a || row.bytes != s || row.threads != t) {
          throw invariant_error(fmt::format("bench result: row {} is {} {} x {}, the plan says {} {} x {}", i - 1,
                                            row.allocator, row.bytes, row.threads, a, s, t));
        }
        if (row.error.empty() && row.pairs == 0) {
          throw invariant_error(fmt::format("bench result: row {} ran no pair and has no error", i - 1));
        }
      }
    }
  }
  bench_result copy = *this;
  derive_ratios(copy);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    if (!same(rows[k].ratio, copy.rows[k].ratio) || !same(rows[k].scaling, copy.rows[k].scaling)) {
      throw invariant_error(fmt::format("bench result: row {} has ratio/scaling that its rows do not give", k));
    }
  }
}

bench_row median_run(std::vector<bench_row> runs) {
  if (runs.empty()) throw invariant_error("bench: a cell with no run");
  const auto failed = std::find_if(runs.begin(), runs.end(), [](const bench_row& x) { return !x.error.empty(); });
  if (failed != runs.end()) return *failed;
  std::stable_sort(runs.begin(), runs.end(),
                   [](const bench_row& x, const bench_row& y) { return x.pairs_per_second < y.pairs_per_second; });
  return runs[(runs.size() - 1) / 2];
}

namespace {

/// One run of one cell: a fresh allocator, measured; a failure becomes the row's error.
bench_row run_cell(const allocator_entry& a, std::size_t bytes, unsigned t, const bench_plan& plan,
                   std::vector<std::string>& notes) {
  bench_row row;
  row.allocator = a.name;
  row.bytes = bytes;
  row.threads = t;
  try {
    std::unique_ptr<bench_target> target = a.make();
    if (std::string note = target->note(); !note.empty()) {
      if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(std::move(note));
    }
    cell_options o;
    o.bytes = bytes;
    o.threads = t;
    o.seconds = plan.seconds;
    o.max_pairs = plan.pairs;
    const cell_result c = measure_cell(*target, o);
    if (c.pairs() == 0) throw error(fmt::format("no pair finished within {} s", plan.seconds));
    row.pairs = c.pairs();
    for (const auto& f : c.threads) row.seconds = std::max(row.seconds, f.seconds);
    row.ns_per_pair = c.ns_per_pair();
    row.pairs_per_second = c.pairs_per_second();
    row.cpu_ns_per_pair = c.cpu_ns_per_pair();
    row.cpu_share = c.cpu_share();
    detail::keep(c.folded);
  } catch (const usage_error&) {
    throw;
  } catch (const error& e) {
    row.error = e.what();
    row.ns_per_pair = row.pairs_per_second = row.cpu_ns_per_pair = row.cpu_share = nan;
  }
  return row;
}

}  // namespace

bench_result run_bench(device& dev, const bench_plan& plan, const progress_fn& progress) {
  bench_result r;
  r.device = dev.name();
  r.simulated = dev.simulated();
  r.date = utc_now();
  r.baseline = plan.baseline;
  r.seconds = plan.seconds;
  r.pairs = plan.pairs;
  r.sizes = plan.sizes;
  r.threads = plan.threads;
  for (const auto& a : plan.allocators) r.allocators.push_back(a.name);
  if (r.simulated) {
    r.notes.push_back("simulated device: vram's figures are its host-side cost alone (the device's calls are "
                      "bookkeeping, with no driver time)");
  }

  const std::size_t cells = plan.sizes.size() * plan.threads.size() * plan.allocators.size();
  const unsigned rounds = std::max(plan.repeat, 1u);
  r.repeat = rounds;
  std::vector<std::vector<bench_row>> runs(cells);  // each cell's rows, one a round
  std::size_t done = 0;
  for (unsigned round = 0; round < rounds; ++round) {
    std::size_t cell = 0;
    for (std::size_t bytes : plan.sizes) {
      for (unsigned t : plan.threads) {
        for (const auto& a : plan.allocators) {
          if (progress) {
            progress(done, cells * rounds,
                     fmt::format("{} {} x {}{}", a.name, size_label(bytes), t,
                                 rounds > 1 ? fmt::format(", round {}/{}", round + 1, rounds) : std::string()));
          }
          runs[cell++].push_back(run_cell(a, bytes, t, plan, r.notes));
          ++done;
        }
      }
    }
  }
  for (auto& cell_runs : runs) r.rows.push_back(median_run(std::move(cell_runs)));
  derive_ratios(r);
  // glibc's small blocks come from a per-thread cache that never waits: its threads off the CPU means other
  // work had the cores.
  const auto busy = std::find_if(r.rows.begin(), r.rows.end(), [&](const bench_row& row) {
    return row.allocator == "glibc" && row.bytes <= KiB && row.threads > 1 && row.cpu_share < busy_share;
  });
  if (busy != r.rows.end()) {
    r.notes.push_back(fmt::format(
        "glibc's {} threads at {} were on a CPU {:.0f}% of the time: other work had the cores, so pairs/s and "
        "scaling at several threads understate what the allocators do on idle cores (cpu ns/pair does not)",
        busy->threads, size_label(busy->bytes), 100 * busy->cpu_share));
  }
  return r;
}

}  // namespace vram::measure
