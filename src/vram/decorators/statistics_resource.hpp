#pragma once
// Counts what passes through to the upstream resource: allocations, frees, failures, and the bytes and
// blocks live, with their peaks. Requested sizes, as the program asked (the upstream's allocated_bytes()
// has them rounded). Not thread-safe: put a thread_safe_resource above it for threads.

#include <cstddef>
#include <cstdint>

#include "vram/decorators/resource_adaptor.hpp"

namespace vram {

struct resource_statistics {
  std::uint64_t allocations = 0;         // served
  std::uint64_t frees = 0;               // accepted by the upstream
  std::uint64_t failed_allocations = 0;  // the upstream could not serve them
  std::size_t live_bytes = 0, peak_live_bytes = 0;
  std::size_t live_blocks = 0, peak_live_blocks = 0;
};

class statistics_resource final : public resource_adaptor {
 public:
  using resource_adaptor::resource_adaptor;

  const resource_statistics& statistics() const noexcept { return stats_; }
  /// @brief The peaks start again from the current figures.
  void reset_peaks() noexcept {
    stats_.peak_live_bytes = stats_.live_bytes;
    stats_.peak_live_blocks = stats_.live_blocks;
  }

 protected:
  device_ptr do_allocate(std::size_t bytes, stream_id stream) override {
    const device_ptr p = resource_adaptor::do_allocate(bytes, stream);
    if (p == 0) {
      ++stats_.failed_allocations;
      return 0;
    }
    ++stats_.allocations;
    stats_.live_bytes += bytes;
    ++stats_.live_blocks;
    if (stats_.live_bytes > stats_.peak_live_bytes) stats_.peak_live_bytes = stats_.live_bytes;
    if (stats_.live_blocks > stats_.peak_live_blocks) stats_.peak_live_blocks = stats_.live_blocks;
    return p;
  }
  void do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) override {
    resource_adaptor::do_deallocate(p, bytes, stream);  // throws, counting nothing, for a bad free
    ++stats_.frees;
    stats_.live_bytes -= bytes;
    --stats_.live_blocks;
  }

 private:
  resource_statistics stats_;
};

}  // namespace vram
