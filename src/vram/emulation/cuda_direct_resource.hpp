#pragma once
// The `cuda-direct` policy: no pool at all. Every allocate is one cudaMalloc (device::legacy_malloc) and
// every deallocate one cudaFree (device::legacy_free), as a program that calls the driver directly would do.
// It is the baseline that shows what the caching allocators save in driver calls and what they cost in
// memory.
//
// Accounting (docs/device.md, "How cudaMalloc packs blocks"):
//  - allocated_ is the sum of the live blocks' sizes rounded up to 512 bytes (cudaMalloc's alignment);
//  - reserved_ is what the driver holds for those blocks as it packs them: blocks up to 1 MiB share 2 MiB
//    pages, and a page counts from its first live block to its last; larger blocks count their size rounded
//    up to whole 2 MiB pages. The resource works this out from the addresses it was given (a small block's
//    page is p & ~(2 MiB - 1)), with no extra driver call, whatever sizes the driver puts together in a page
//    (the H200's driver mixes sizes in one page; the simulated device keeps one size a page). On the
//    simulated device it equals the device's used bytes when this resource is the device's only legacy user.
//  - free_memory(): total = reserved_ - allocated_ (free bytes in shared pages, the tails of 2 MiB pages
//    and of 512-byte rounding); largest = the most free bytes of one shared page (an upper bound on the
//    largest hole there), 0 when no page has room.
// A deallocate of a pointer not live here, or with another size than it was allocated with, throws
// usage_error and changes nothing. Streams are ignored: cudaFree waits for the whole device.

#include <array>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <unordered_map>

#include "vram/resource/memory_resource.hpp"
#include "vram/resource/policy_options.hpp"

namespace vram {

/// @brief cudaMalloc / cudaFree for every block: the `cuda-direct` policy.
class cuda_direct_resource final : public memory_resource {
 public:
  /// @brief A resource over @p dev. pre: @p dev outlives the resource.
  explicit cuda_direct_resource(device& dev);
  /// @brief Frees the blocks still live, as a process exit would.
  ~cuda_direct_resource() override;

  std::string_view name() const noexcept override { return "cuda-direct"; }
  free_space free_memory() const override;
  void validate() const override;

  /// @brief Blocks live now.
  std::size_t live_blocks() const noexcept { return live_.size(); }

 protected:
  device_ptr do_allocate(std::size_t bytes, stream_id stream) override;
  void do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) override;

 private:
  static constexpr std::size_t page_bytes = 2 * MiB;      // the driver's page for small blocks
  static constexpr std::size_t small_max = 1 * MiB;       // larger blocks take whole pages
  static constexpr std::size_t alignment = 512;           // cudaMalloc's rounding

  struct page_use {
    std::size_t bytes = 0;   // rounded bytes of this resource's live blocks in the page
    std::uint32_t live = 0;  // live blocks of this resource in it
  };

  std::pmr::unsynchronized_pool_resource pool_;  // nodes of the maps below, reused in a steady replay
  std::pmr::unordered_map<device_ptr, std::size_t> live_;  // block -> bytes asked for
  std::pmr::unordered_map<device_ptr, page_use> pages_;    // 2 MiB page start -> its use
};

/// @brief The `cuda-direct` policy for the registry. @throws usage_error for any setting (it takes none).
std::unique_ptr<memory_resource> make_cuda_direct_resource(device& dev, const policy_options& options);

}  // namespace vram
