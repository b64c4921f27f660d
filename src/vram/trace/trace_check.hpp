#pragma once
// Consistency of a trace's frees and allocs, for `vram convert` (which warns) and the tests. None of these
// is a read error: the replay counts and skips such rows. Only the program's own rows are checked
// (alloc and free_requested); the recorded allocator's rows are its own business.

#include <cstddef>
#include <cstdint>
#include <optional>

#include "vram/trace/trace.hpp"

namespace vram {

/// @brief What check_trace found. Event indexes are 0-based positions in trace::events.
struct trace_check {
  std::uint64_t unmatched_frees = 0;   // free_requested at an address never allocated
  std::uint64_t double_frees = 0;      // free_requested at an address whose latest alloc is already freed
  std::uint64_t duplicate_allocs = 0;  // alloc at an address that is still live
  std::uint64_t wrong_size_frees = 0;  // free_requested of a live block with another size than its alloc's
  std::optional<std::size_t> first_unmatched_free;
  std::optional<std::size_t> first_double_free;
  std::optional<std::size_t> first_duplicate_alloc;
  std::optional<std::size_t> first_wrong_size_free;
  std::uint64_t live_at_end = 0;  // allocs never freed (not a problem: a trace may stop mid-run)

  /// @brief True when every free matches a live block of its size and no alloc lands on a live address.
  bool clean() const noexcept {
    return unmatched_frees == 0 && double_frees == 0 && duplicate_allocs == 0 && wrong_size_frees == 0;
  }
};

/// @brief Walks @p t matching each free_requested to the latest alloc at its address.
trace_check check_trace(const trace& t);

}  // namespace vram
