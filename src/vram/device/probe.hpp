#pragma once
// Probing a device: how much memory can be allocated right now, in one block and in all, using only the
// device seam (so it runs, and is tested, on the simulated device). Two searches for the largest block:
//  - a search over multiples of a step (the granularity): the first try is the whole free memory rounded
//    down to the step; when that fails, it steps down from there by 1, 2, 4, ... steps until a size fits,
//    then binary-searches the last gap. On a GPU the largest block lies just under the free memory (the
//    H200: one granule under it, 2 tries), found in a few tries; at worst about 2 log2(free / step);
//  - the classic halving search, for comparison: try total/2, total/4, ... and keep the first that succeeds
//    (what a program finds that halves its request until it fits: it can miss nearly half the memory).
// Each try is a legacy_malloc freed at once. "Allocatable" takes the largest block, again and again, until
// nothing more fits, then frees all it took. Fragmentation = 1 - largest block / free memory.
// pre (for all of them): nothing else allocates on the device while a probe runs.
//
// Also the reading of a pool's snapshot (pool_resource::snapshot(), docs/pool.md): its free ranges, their
// largest and the fragmentation they make; summarize_snapshot() is the one place that knows the format.

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "vram/device/device.hpp"

namespace vram {

/// @brief The outcome of one search for a block.
struct block_search {
  std::size_t bytes = 0;  // the largest block that succeeded; 0 when none did
  unsigned tries = 0;     // legacy_malloc calls made
};

struct probe_options {
  std::size_t step = 0;         // the binary search's unit; 0: the device's granularity
  std::size_t max_blocks = 4096;  // at most this many blocks for the allocatable total
  bool allocatable = true;      // whether to measure the allocatable total at all
};

struct probe_result {
  memory_info before;         // mem_info when the probe began
  std::size_t step = 0;       // the binary search's unit
  block_search largest;       // the search from the top: the largest single block
  block_search halving;       // total/2, total/4, ...: the first that succeeded
  std::size_t allocatable = 0;  // bytes of the blocks taken one after another until nothing fitted
  std::size_t blocks = 0;       // how many blocks that was
  unsigned allocatable_tries = 0;  // legacy_malloc calls it made (searches and takes)
  bool capped = false;          // stopped at max_blocks with more still fitting
  double fragmentation = 0.0;   // 1 - largest.bytes / before.free (0 when nothing is free)
};

/// @brief 1 - largest / free, or 0 when @p free is 0.
double fragmentation(std::size_t largest, std::size_t free) noexcept;

/// @brief The largest multiple of @p step, at most @p upper bytes, that legacy_malloc grants now (down from
/// the top by doubling steps, then binary search; each success freed at once). pre: step > 0.
block_search find_largest_block(device& dev, std::size_t upper, std::size_t step);

/// @brief The first of total/2, total/4, ... (down to @p step) that legacy_malloc grants. pre: step > 0.
block_search find_block_by_halving(device& dev, std::size_t total, std::size_t step);

/// @brief Runs both searches and the allocatable total; leaves the device as it found it.
probe_result probe(device& dev, const probe_options& options = {});

/// @brief What a pool's free ranges say about its fragmentation.
struct free_ranges_summary {
  std::size_t ranges = 0;
  std::size_t free_bytes = 0;
  std::size_t largest = 0;
  double fragmentation = 0.0;  // 1 - largest / free_bytes
  std::size_t reserved_bytes = 0;  // the pool's reserved bytes, where the snapshot says (else 0)
  std::string policy;              // where the snapshot says
  std::string device;              // where the snapshot says
};

/// @brief Reads a pool snapshot: a JSON object whose "free_ranges" is [[address, bytes], ...] (an address
/// may be a number or a string such as "0x7f00"). @throws input_error naming what is malformed.
free_ranges_summary summarize_snapshot(const nlohmann::json& snapshot);

/// @brief summarize_snapshot() of a file. @throws input_error naming the file.
free_ranges_summary read_snapshot_file(const std::string& path);

}  // namespace vram
