#pragma once
// Builds a trace row by row with unique fake addresses, for the synthetic workloads and the tests.

#include <cstdint>

#include "vram/trace/trace.hpp"

namespace vram {

class trace_builder {
 public:
  explicit trace_builder(std::string name) { trace_.name = std::move(name); }

  /// @brief Appends an alloc row at @p time_us; returns the address that identifies the block.
  std::uint64_t alloc(std::int64_t time_us, std::uint64_t size, std::uint64_t stream = 0) {
    const std::uint64_t addr = next_addr_;
    next_addr_ += 512 * ((size + 511) / 512 + 1);  // distinct and never overlapping
    trace_.events.push_back({time_us, addr, size, stream, trace_action::alloc});
    return addr;
  }
  /// @brief Appends a free_requested row for the block at @p addr.
  void free(std::int64_t time_us, std::uint64_t addr, std::uint64_t size, std::uint64_t stream = 0) {
    trace_.events.push_back({time_us, addr, size, stream, trace_action::free_requested});
  }
  trace take() { return std::move(trace_); }
  std::size_t size() const noexcept { return trace_.events.size(); }

 private:
  trace trace_;
  std::uint64_t next_addr_ = 0x7f0000000000;
};

}  // namespace vram
