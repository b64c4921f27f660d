#pragma once
// The pace of the arena's growth: whether the growths of the last window (the device's time, which a replay
// sets to the trace's) sum to a burst. A burst (a training step mapping its working set in milliseconds) gets
// large handles, where the driver calls are the cost; other growth gets small ones, which let freed memory
// move (arena.hpp).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>

namespace vram::detail {

class growth_pace {
 public:
  /// @brief Growths summing to at least @p burst_bytes within @p window_ns (a growth at t counts until t +
  /// window_ns, exclusive) are a burst.
  growth_pace(std::size_t burst_bytes, std::int64_t window_ns) : burst_bytes_(burst_bytes), window_ns_(window_ns) {}

  /// @brief Notes a growth of @p bytes at @p now_ns (never earlier than the last) and returns whether the
  /// growths of the window, this one included, are a burst.
  bool note(std::int64_t now_ns, std::size_t bytes);
  /// @brief The answer of the last note() (false before the first).
  bool bursting() const noexcept { return bursting_; }
  /// @brief Bytes of the growths in the window as of the last note().
  std::size_t recent_bytes() const noexcept { return recent_bytes_; }
  /// @brief Entries kept: growths at one instant share one.
  std::size_t entries() const noexcept { return recent_.size(); }

 private:
  std::size_t burst_bytes_;
  std::int64_t window_ns_;
  std::deque<std::pair<std::int64_t, std::size_t>> recent_;  // (time, bytes) within the window
  std::size_t recent_bytes_ = 0;
  bool bursting_ = false;
};

}  // namespace vram::detail
