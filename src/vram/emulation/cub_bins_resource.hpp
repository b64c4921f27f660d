#pragma once
// cub-bins: an emulation of CUB's CachingDeviceAllocator (cub/util_allocator.cuh, CCCL 3.x) with the
// settings of its default constructor. Rules followed (docs/emulations/cub.md):
//  - a request rounds up to the next power of bin_growth (8), at least bin_growth^min_bin (512 B); above
//    bin_growth^max_bin (2 MiB) it is served exactly by the device and given back to it when freed;
//  - a freed block of a bin stays cached unless the cached bytes would pass max_cached_bytes
//    (default 3 * 2 MiB - 1 = 6,291,455), in which case it goes back to the device at once;
//  - a request reuses a cached block of exactly its bin: one last used on the same stream at once, one of
//    another stream only once that block's ready event (recorded on its stream at the free) has completed;
//    within a bin the oldest cached block is looked at first;
//  - when the device refuses a block, every cached block is given back and the request is tried once more.
// A block belongs to the stream it was allocated on: deallocate's stream is ignored, as DeviceFree takes none.

#include <cstddef>
#include <map>
#include <string>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "vram/resource/memory_resource.hpp"
#include "vram/resource/policy_options.hpp"

namespace vram {

/// @brief Settings of cub-bins; the defaults are those of CachingDeviceAllocator's default constructor.
struct cub_bins_options {
  unsigned bin_growth = 8;
  unsigned min_bin = 3;
  unsigned max_bin = 7;
  std::size_t max_cached_bytes = 3 * 2 * MiB - 1;  // (bin_growth^max_bin * 3) - 1 = 6,291,455
};

/// @brief CUB's CachingDeviceAllocator on a vram device.
class cub_bins_resource final : public memory_resource {
 public:
  /// @throws usage_error for bin_growth < 2, min_bin > max_bin, or a largest bin that overflows.
  cub_bins_resource(device& dev, const cub_bins_options& options = {});
  /// @brief Gives every block, cached or live, back to the device.
  ~cub_bins_resource() override;

  std::string_view name() const noexcept override { return "cub-bins"; }
  /// @brief The cached blocks: their total and the largest one.
  free_space free_memory() const override;
  /// @brief CUB's FreeAllCached: every cached block goes back to the device.
  void release_cached() override;
  void validate() const override;

  /// @brief The size a request of @p bytes is served with: its bin's size, or @p bytes above the largest bin.
  std::size_t block_size(std::size_t bytes) const noexcept;
  std::size_t cached_bytes() const noexcept { return cached_bytes_; }
  std::size_t cached_blocks() const noexcept { return cached_.size(); }
  std::size_t live_blocks() const noexcept { return live_.size(); }
  const cub_bins_options& options() const noexcept { return options_; }

 protected:
  device_ptr do_allocate(std::size_t bytes, stream_id stream) override;
  void do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) override;
  std::string out_of_memory_message(std::size_t bytes, stream_id stream) const override;

 private:
  struct live_block {
    std::size_t bytes;      // bin size, or the exact request above the largest bin
    std::size_t requested;  // as asked
    stream_id stream;       // the stream the block was allocated on
    event_id ready;         // recorded on that stream when the block is cached
    bool binned;            // false above the largest bin: never cached
  };
  struct cached_block {
    device_ptr ptr;
    stream_id stream;
    event_id ready;
  };

  /// @brief Bin size for @p bytes, or 0 when the request is above the largest bin.
  std::size_t bin_bytes(std::size_t bytes) const noexcept;
  device_ptr device_malloc(std::size_t bytes);
  void free_all_cached();

  cub_bins_options options_;
  std::size_t min_bin_bytes_;
  std::size_t max_bin_bytes_;
  std::size_t cached_bytes_ = 0;
  // Cached blocks by size; equal sizes keep their order of arrival, as CUB's multiset does.
  std::multimap<std::size_t, cached_block> cached_;
  std::unordered_map<device_ptr, live_block> live_;
};

/// @brief Makes cub-bins from policy settings: bin_growth, min_bin, max_bin (integers) and
/// max_cached_bytes (a size such as 6MiB). @throws usage_error for an unknown key or a bad value.
std::unique_ptr<memory_resource> make_cub_bins_resource(device& dev, const policy_options& options);

}  // namespace vram
