#pragma once
// vram's pool: the `vram` policy and the allocator programs link. Blocks are placed by best fit at 512-byte
// granularity in an arena that maps physical memory only where blocks sit and recycles wholly free handles
// to wherever memory is wanted (arena.hpp); blocks up to 1 MiB live in a zone of their own so they never
// pin the handles under large blocks. See docs/pool.md for the design and the measurements behind it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "vram/pool/arena.hpp"
#include "vram/pool/pool_options.hpp"
#include "vram/resource/memory_resource.hpp"

namespace vram {

/// @brief The pool's statistics: current and peak figures, and counts of calls.
struct pool_stats {
  std::size_t requested_bytes = 0, peak_requested_bytes = 0;  // bytes the program asked for, live
  std::size_t allocated_bytes = 0, peak_allocated_bytes = 0;  // rounded sizes of live blocks
  std::size_t reserved_bytes = 0, peak_reserved_bytes = 0;    // held from the device
  std::size_t cached_bytes = 0;                               // reserved but in no live block
  std::size_t mapped_bytes = 0;
  std::uint64_t allocations = 0, frees = 0, failed_allocations = 0;
  detail::arena_counters arena;
};

class pool_resource final : public memory_resource {
 public:
  /// Requests up to this size go to the small zone.
  static constexpr std::size_t small_max = std::size_t{1} << 20;

  explicit pool_resource(device& dev, pool_options options = pool_options::from_environment());
  ~pool_resource() override;

  std::string_view name() const noexcept override { return "vram"; }
  free_space free_memory() const override;
  void release_cached() override { trim(); }
  void validate() const override;

  /// @brief Gives every wholly free handle back to the device. Returns the bytes released.
  std::size_t trim();
  /// @brief Most bytes the pool may hold from the device (0: none).
  void set_limit(std::size_t bytes);
  std::size_t limit() const;
  pool_stats stats() const;
  /// @brief The pool's address ranges, handles and free ranges, as JSON (docs/pool.md).
  nlohmann::json snapshot() const;

 protected:
  device_ptr do_allocate(std::size_t bytes, stream_id stream) override;
  void do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) override;
  std::string out_of_memory_message(std::size_t bytes, stream_id stream) const override;

 private:
  void update_peaks();

  pool_options options_;
  mutable std::mutex mutex_;
  detail::arena arena_;  // zone 0: blocks up to small_max; zone 1: larger ones
  std::unordered_map<device_ptr, std::size_t> live_;  // live block -> rounded size
  pool_stats stats_;
};

/// @brief The `vram` policy's factory for the registry.
std::unique_ptr<memory_resource> make_vram_pool_resource(device& dev, const policy_options& options);

}  // namespace vram
