#pragma once
// Where the arena puts a block, as pure functions of its books (handle_map.hpp) and a request: a plan, which
// the arena then carries out with the device (arena.cpp). Tested by hand on books set up without a device.
//
// Every candidate is scored by the bytes of handles it *pins*: handles that no live block touched before
// and that the block will touch (cold handles it lands on, and handles mapped anew). Pinning is what turns
// free memory into memory held for the block, so the least pinning is the least memory held. Candidates:
//  - in mapped free memory (plan_mapped): the best-fitting free ranges, the block at either end of each;
//  - growth (plan_growth: memory mapped for the block). A zone's address space is mapped views separated by
//    unmapped gaps. Beside a gap, the free memory that ends where the gap starts is a *suffix* of the handle
//    mapped there, and the free memory that starts where the gap ends is a *prefix* of the next handle. A
//    block can
//      - start in the suffix (left-aligned) and run into the gap, mapping handles there; if it reaches the
//        far side, it ends in the prefix; at the top of the zone this is how an expandable segment grows;
//      - end in the prefix (right-aligned), its first bytes in a new granule mapped into the gap;
//      - use a suffix or prefix *elsewhere* (an alias): that handle is mapped once more beside the block's
//        new handles, so that its free end falls at the block's first (or last) bytes. The bytes move from the
//        old view to the new one (foreign at the old), so each byte is still reachable from one free list.
// Two orders. By pinning (a tight arena) the least pinning wins anywhere; otherwise mapped memory beats growth
// and, among growths, the fewest driver calls. Only a lean arena grows into holes, and only a tight one with
// aliasing allowed uses pieces, for blocks up to growth_settings::alias_max. Ties go to the plan with fewer
// alias mappings, then to the one that leaves the least free memory behind, then to the lower address.

#include <cstddef>
#include <cstdint>
#include <tuple>

#include "vram/core/types.hpp"
#include "vram/pool/handle_map.hpp"
#include "vram/pool/piece_index.hpp"
#include "vram/pool/pressure.hpp"

namespace vram::detail {

/// Free memory at one end of a handle.
struct piece {
  device_ptr at = 0;    // the free bytes, at the view that owns them
  std::size_t len = 0;  // 0: no piece
  std::uint32_t handle = handle_map::none;
  std::size_t handle_bytes = 0;
};

/// One way to place a block.
struct growth_plan {
  bool valid = false;
  bool grows = false;         // maps memory (driver calls); else a range of mapped free memory
  std::size_t pinned = 0;     // the score: bytes of handles the block makes busy
  std::size_t calls = 0;      // views it maps
  std::size_t leftover = SIZE_MAX;  // free memory left in the ranges it uses (ties: less is better)
  bool in_hole = false;
  bool fresh = false;     // in a new address range, found when carried out (block and map_at then)
  device_ptr block = 0;
  device_ptr map_at = 0;  // where the new handles go
  std::size_t need = 0;   // their bytes
  std::size_t room = 0;   // most bytes they may span from map_at (more than need stays free)
  std::size_t split = 0;  // a handle boundary wanted this far from map_at (0: none)
  piece head, tail;       // aliases: the block's first head_use bytes / last tail_use bytes
  std::size_t head_use = 0, tail_use = 0;

  /// The order plans are compared in, by pinning first or by growing first.
  auto key(bool by_pinning) const {
    return by_pinning ? std::make_tuple(pinned, std::size_t{grows}, calls, leftover, block)
                      : std::make_tuple(std::size_t{grows}, pinned, calls, leftover, block);
  }
};

/// What growth may do now.
struct growth_settings {
  std::size_t handle_cap = 0;  // the largest handle it may create (a multiple of the granularity)
  pressure level = pressure::roomy;
  bool aliasing = true;
  std::size_t alias_max = SIZE_MAX;  // the largest block that may take free ends of handles elsewhere
};

/// @brief The best place for @p size bytes aligned to @p align in zone @p zone's mapped free memory: the
/// best fit, or (@p by_pinning) the least pinning among the 8 best-fitting ranges, at either end of each.
/// Invalid when nothing fits.
growth_plan plan_mapped(const handle_map& books, std::size_t size, std::size_t align, std::size_t zone,
                        bool by_pinning);

/// @brief The best growth for the same request: the top of the zone, holes (lean), aliases of @p pieces
/// (tight, with aliasing), or a fresh address range.
growth_plan plan_growth(const handle_map& books, const piece_index& pieces, std::size_t size, std::size_t align,
                        std::size_t zone, bool by_pinning, const growth_settings& settings);

}  // namespace vram::detail
