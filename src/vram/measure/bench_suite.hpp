#pragma once
// `vram bench` as a whole: which sizes, thread counts and allocators run on a device, the cells run one
// after another, and the rows they give, with each row's ratio to the baseline allocator of its cell and
// its scaling over the same allocator at one thread.
//
// Allocators, all in one run:
//  - simulated device: "vram" (pool_resource over the device) and "glibc" (malloc/free, the baseline);
//  - CUDA device: "cudaMalloc" (the seam's legacy calls), "cudaMallocAsync" (the device's default memory
//    pool, release threshold at its maximum, a stream per thread; the baseline), "vram" (pool_resource over
//    the device) and "torch-native" (the emulation, behind one mutex: it is not thread-safe).
// Every cell gets a fresh allocator (and frees all it held before the next), so no cell inherits another's
// cache. A cell whose allocator fails (out of memory, a driver error) gives a row with the error and no
// figures, and the run goes on.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vram/measure/bench_target.hpp"

namespace vram {
class device;
}

namespace vram::measure {

/// @brief What the command line asks for; empty lists take the device's defaults.
struct bench_options {
  std::vector<std::size_t> sizes;
  std::vector<unsigned> threads;
  double seconds = 0.2;     // per cell, after warm-up
  std::uint64_t pairs = 0;  // per thread and cell; 0: time alone
  unsigned repeat = 0;      // runs of every cell, the median kept; 0: the device's default

  /// @brief @throws usage_error for a zero size, a thread count of 0 or above max_threads, or a time below
  /// min_seconds or not finite (plan_for also refuses a run of more than an hour).
  void check() const;
};

inline constexpr unsigned max_threads = 1024;
/// The shortest time per cell: less and threads may finish no pair (a cell that does is reported failed).
inline constexpr double min_seconds = 0.001;

/// @brief 512 B, 4 KiB, 64 KiB, 1 MiB, 8 MiB, 64 MiB; on a GPU also 256 MiB and 1 GiB.
std::vector<std::size_t> default_sizes(bool simulated);
/// @brief 1, 2 on the simulated device; 1, 4, 16 on a GPU.
std::vector<unsigned> default_threads(bool simulated);
/// @brief 3 on the simulated device (a shared host's noise), 1 on a GPU (where each cell runs long enough).
unsigned default_repeat(bool simulated);
inline constexpr unsigned max_repeat = 100;

/// @brief "512,4K,64KiB,1M" into sizes. @throws usage_error for an empty list or item, a bad or zero size, or
/// a size given twice.
std::vector<std::size_t> parse_size_list(std::string_view list);
/// @brief "1,2,4" into thread counts. @throws usage_error for an empty list or item, a count of 0 or above
/// max_threads, text that is not a whole number, or a count given twice.
std::vector<unsigned> parse_thread_list(std::string_view list);

/// @brief An allocator of the run: its name and how to make a fresh one for a cell.
struct allocator_entry {
  std::string name;
  std::function<std::unique_ptr<bench_target>()> make;
};

/// @brief Everything a run does: cells are sizes x threads x allocators, in that order of nesting.
struct bench_plan {
  std::vector<std::size_t> sizes;
  std::vector<unsigned> threads;
  double seconds = 0.2;
  std::uint64_t pairs = 0;
  unsigned repeat = 1;   // each cell runs this many times, in turn with every other cell; its median run is kept
  std::string baseline;  // the allocator whose pairs/s each row's ratio divides by
  std::vector<allocator_entry> allocators;
};

/// @brief The plan for @p dev: its allocators, and @p o with the device's defaults filled in.
/// @p dev must outlive the plan. @throws usage_error from o.check(), and for a run whose timed part, over
/// every cell of every allocator and every round, is more than an hour.
bench_plan plan_for(device& dev, const bench_options& o);

/// @brief One cell's figures. Figures are NaN where they cannot be had (a failed cell, no baseline row,
/// no one-thread row).
struct bench_row {
  std::string allocator;
  std::size_t bytes = 0;
  unsigned threads = 0;
  std::uint64_t pairs = 0;        // all threads, timed part
  double seconds = 0;             // the longest thread's timed part
  double ns_per_pair = 0;         // per thread: summed thread time / summed pairs
  double pairs_per_second = 0;    // all threads together
  double cpu_ns_per_pair = 0;     // per thread, in CPU time: summed thread CPU time / summed pairs
  double cpu_share = 0;           // summed thread CPU time / summed thread time (1: never off the CPU)
  double ratio = 0;               // pairs_per_second / the baseline's in the same size and threads
  double scaling = 0;             // pairs_per_second / this allocator's at 1 thread, same size
  std::string error;              // why the cell failed; empty when it ran
};

struct bench_result {
  std::string device;
  bool simulated = true;
  std::string date;     // UTC, ISO 8601, when the run started
  std::string command;  // as typed, where the caller knows it
  std::string baseline;
  double seconds = 0;
  std::uint64_t pairs = 0;
  unsigned repeat = 1;
  std::vector<std::size_t> sizes;
  std::vector<unsigned> threads;
  std::vector<std::string> allocators;
  std::vector<std::string> notes;  // how allocators were measured, and anything the reader must know
  std::vector<bench_row> rows;

  /// @brief The row of a cell, or nullptr.
  const bench_row* find(std::string_view allocator, std::size_t bytes, unsigned threads) const;
  /// @brief Checks one row per cell in plan order, and ratio/scaling consistent with the rows they divide by;
  /// throws invariant_error naming the broken one.
  void validate() const;
};

/// @brief Of one cell's runs, the one with the median pairs/s (the lower middle one for an even count), whole,
/// so its figures agree with each other; the first failed run instead, when one failed.
/// @throws invariant_error for no runs.
bench_row median_run(std::vector<bench_row> runs);

/// @brief Fills every row's ratio and scaling from the other rows (NaN where the divisor is missing/failed).
void derive_ratios(bench_result& r);

/// @brief Called before each cell: cells done, cells in all, and the cell about to run ("vram 4 KiB x 2").
using progress_fn = std::function<void(std::size_t done, std::size_t total, const std::string& cell)>;

/// @brief Runs every cell of @p plan on @p dev, plan.repeat rounds of all cells, and returns for each cell the
/// round with the median pairs/s (a cell that failed in any round gives that round's error), with ratios.
bench_result run_bench(device& dev, const bench_plan& plan, const progress_fn& progress = {});

/// @brief "512 B", "4 KiB", "64 MiB", "1 GiB": exact sizes in the largest unit that divides them.
std::string size_label(std::size_t bytes);

}  // namespace vram::measure
