#pragma once
// Every setting of vram's pool in one table: its name (as a policy option: `vram:max_cached_ratio=0.1`),
// its environment variable (read once, when a pool is made with from_environment()), and its default.
//
// | name              | environment variable     | default | what it does                                      |
// |-------------------|--------------------------|---------|---------------------------------------------------|
// | max_cached_ratio  | VRAM_MAX_CACHED_RATIO    | 0.05    | mapped-but-unused memory allowed, as a share of   |
// |                   |                          |         | bytes in use, before growth recycles free handles |
// | max_handle        | VRAM_MAX_HANDLE          | 64MiB   | largest physical handle made at once (in a burst) |
// |                   |                          |         | but for a block of block_handles x max_handle or  |
// |                   |                          |         | more                                              |
// | small_handle      | VRAM_SMALL_HANDLE        | 8MiB    | largest handle made outside a burst of growth     |
// |                   |                          |         | (0: max_handle always)                            |
// | block_handles     | VRAM_BLOCK_HANDLES       | 8       | a block of block_handles x max_handle or more is  |
// |                   |                          |         | made of handles of up to 1/block_handles of it    |
// |                   |                          |         | (0: never handles larger than max_handle)         |
// | burst_bytes       | VRAM_BURST_BYTES         | 256MiB  | growth of this much within burst_window is a      |
// |                   |                          |         | burst, whose handles may be up to max_handle      |
// | burst_window      | VRAM_BURST_WINDOW        | 10      | milliseconds over which growth is summed          |
// | spare_slack       | VRAM_SPARE_SLACK         | 2MiB    | past the cache budget, the most of a spare handle |
// |                   |                          |         | a growth may map beyond what it wants; a larger   |
// |                   |                          |         | spare goes back to the device (max_handle: never) |
// | holes_below_peak  | VRAM_HOLES_BELOW_PEAK    | 1       | growth that keeps the bytes in use at or below    |
// |                   |                          |         | their peak may fill holes between mapped ranges   |
// |                   |                          |         | (0: only when lean or tight)                      |
// | aliasing          | VRAM_ALIASING            | 1       | on a tight device, map a handle again elsewhere to|
// |                   |                          |         | use the free memory at its ends (0: off)          |
// | reserve_ratio     | VRAM_RESERVE_RATIO       | 1.12    | reserved memory to keep under, as a multiple of   |
// |                   |                          |         | the peak bytes in use: nearing it, growth fills   |
// |                   |                          |         | holes and makes smaller handles                   |
// |                   |                          |         | (0: only near the device's end or the limit)      |
// | limit             | VRAM_LIMIT               | 0       | most bytes held from the device (0: no limit)     |
// | thread_cache      | VRAM_THREAD_CACHE        | 1       | per-thread caches of freed blocks (0: off)        |
// | thread_cache_bytes| VRAM_THREAD_CACHE_BYTES  | 4MiB    | most bytes one thread's cache holds               |
// | membarrier        | VRAM_MEMBARRIER          | 1       | stop threads' hot paths with the kernel's         |
// |                   |                          |         | membarrier where it has one (0: every cached call |
// |                   |                          |         | makes one atomic exchange instead)                |

#include <cstddef>
#include <string>
#include <vector>

#include "vram/resource/policy_options.hpp"

namespace vram {

struct pool_options {
  double max_cached_ratio = 0.05;
  std::size_t max_handle_bytes = std::size_t{64} << 20;
  std::size_t small_handle_bytes = std::size_t{8} << 20;
  std::size_t block_handles = 8;
  std::size_t burst_bytes = std::size_t{256} << 20;
  double burst_window_ms = 10;
  std::size_t spare_slack_bytes = std::size_t{2} << 20;
  bool holes_below_peak = true;
  bool aliasing = true;
  double reserve_ratio = 1.12;
  std::size_t limit = 0;
  bool thread_cache = true;
  std::size_t thread_cache_bytes = std::size_t{4} << 20;
  bool membarrier = true;

  /// @brief Defaults overridden by the environment variables of the table. @throws usage_error for a bad value.
  static pool_options from_environment();
  /// @brief The table's environment variables set now, as "NAME=value", in the table's order.
  static std::vector<std::string> environment_settings();
  /// @brief These options with policy settings applied. @throws usage_error for an unknown key or bad value.
  pool_options with(const policy_options& settings) const;
};

}  // namespace vram
