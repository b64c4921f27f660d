#pragma once
// The allocator's state at one moment, as `vram report` draws it to scale: the device memory it holds, in
// strips of contiguous addresses (a cudaMalloc segment, a shared 2 MiB page of small legacy blocks, or a run
// of handles mapped side by side), and where in them the live blocks sit. What a strip holds outside its
// live blocks is free inside the allocator (cached, or mapped but unused): its pieces are the holes that
// external fragmentation is made of.

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "vram/core/types.hpp"
#include "vram/device/device.hpp"
#include "vram/device/sim_device.hpp"

namespace vram {

/// @brief Held memory contiguous in address, of one kind, and the live bytes in it.
struct map_strip {
  device_ptr va = 0;
  std::size_t bytes = 0;
  device_region::kind what = device_region::kind::mapping;
  std::size_t regions = 1;  // device regions in it (handles, for mappings side by side)
  /// [begin, end) offsets of live bytes in the strip, ascending, adjacent ones merged.
  std::vector<std::pair<std::size_t, std::size_t>> live;
};

struct memory_state {
  std::vector<map_strip> strips;  // by address
  std::size_t held_bytes = 0;     // bytes of the strips
  std::size_t live_bytes = 0;     // live bytes inside the strips
  std::size_t free_pieces = 0;    // maximal runs of held bytes with no live block
  std::size_t largest_free = 0;   // the longest such run
  std::size_t device_free = 0;    // not held by anyone (cuMemGetInfo's free)
  std::size_t device_total = 0;
};

/// @brief The state from the device's regions (sim_device::regions()) and the live blocks (address,
/// requested bytes). Regions that are mappings side by side make one strip; others a strip each.
memory_state capture_state(std::span<const device_region> regions,
                           std::vector<std::pair<device_ptr, std::size_t>> blocks, memory_info info);

/// @brief The strip in cells of @p unit bytes (the last may be short), each a digit: the live share of the
/// cell in eighths, rounded, but 0 only when nothing in it is live and 8 only when all is. Runs are coded
/// "d" or "d*n" and separated by spaces: "8*3 5 0*12".
std::string encode_cells(const map_strip& strip, std::size_t unit);

/// @brief A power of two of at least 512 bytes such that @p bytes take at most @p cells cells.
std::size_t cell_unit(std::size_t bytes, std::size_t cells);

}  // namespace vram
