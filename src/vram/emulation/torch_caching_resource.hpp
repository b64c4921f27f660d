#pragma once
// An emulation of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.x), policies
// "torch-native" (cudaMalloc segments) and "torch-expandable" (expandable_segments:True). It makes the same
// decisions as PyTorch, so a replay reserves what PyTorch would have reserved, byte for byte:
//  - sizes round up to 512 bytes (or to power-of-two divisions with roundup_power2_divisions);
//  - rounded requests <= 1 MiB use the small pool and 2 MiB segments; larger ones the large pool, with 20 MiB
//    segments below 10 MiB and segments of the request rounded up to 2 MiB from 10 MiB;
//  - a request takes the best-fitting cached block of its pool and stream (smallest size, then lowest
//    address); blocks >= max_split_size serve only requests >= max_split_size, and then only if they
//    exceed the request by less than max_non_split_rounding (20 MiB);
//  - a block is split when the rest is >= 512 bytes (small pool, or any expandable segment) or > 1 MiB
//    (large pool, for requests below max_split_size); freed blocks merge with free neighbours;
//  - when the device refuses a segment: free cached oversize blocks (release_available_cached_blocks), retry;
//    then synchronize pending events, free every unsplit cached block (empty_cache) and retry; then fail;
//  - with a per-process memory fraction below 1, segments stop at that share of the device, and
//    garbage_collection_threshold frees the oldest unsplit cached blocks before taking a new segment;
//  - a block is tied to the stream it was allocated on; record_stream marks other streams that use it, and
//    its free then waits for events recorded on them, polled at each allocation.
// Expandable segments (torch_expandable_resource.cpp): one growing segment per (stream, pool), a virtual
// range of 9/8 of the device mapped in pages of 2 MiB (small pool) or 20 MiB (large pool) as needed; a
// new page is mapped at the lowest address with room; empty_cache unmaps whole free pages.
// Not emulated: CUDA graph private pools, IPC sharing, peer access, free-memory callbacks, and the
// multi-device front end. See docs/emulations/torch.md.

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vram/emulation/torch_block_pool.hpp"
#include "vram/resource/memory_resource.hpp"
#include "vram/resource/policy_options.hpp"

namespace vram {

/// @brief The settings of PYTORCH_CUDA_ALLOC_CONF that change placement, plus the per-process memory fraction.
struct torch_allocator_config {
  static constexpr std::size_t divisions_intervals = 16;  // 1 MiB, 2 MiB, ... 32 GiB and above

  std::size_t max_split_size = SIZE_MAX;                           // max_split_size_mb (>= 20)
  std::size_t max_non_split_rounding_size = detail::torch_large_buffer;  // max_non_split_rounding_mb (>= 20)
  std::array<std::size_t, divisions_intervals> roundup_power2_divisions{};  // 0 or 1: off
  double garbage_collection_threshold = 0;                         // (0, 1); acts only with a fraction < 1
  double per_process_memory_fraction = 1.0;                        // torch.cuda.set_per_process_memory_fraction
  bool expandable_segments = false;

  /// @brief Reads policy options: max_split_size_mb, max_non_split_rounding_mb, garbage_collection_threshold,
  /// roundup_power2_divisions ("4", or "[256:4,1024:2,>:1]" with ',' or '|' between entries),
  /// per_process_memory_fraction, expandable_segments (true/false).
  /// @throws usage_error for an unknown key or a value PyTorch would reject.
  static torch_allocator_config parse(const policy_options& options, bool expandable_default);

  /// @brief PyTorch's round_size: the bytes a request of @p size occupies.
  std::size_t round_size(std::size_t size) const noexcept;
  /// @brief The divisions that apply to @p size (0 or 1 when rounding to 512 bytes).
  std::size_t divisions_for(std::size_t size) const noexcept;
};

/// @brief Counters of what the allocator did, named as in torch.cuda.memory_stats().
struct torch_allocator_stats {
  std::uint64_t segments = 0;              // segments held now (legacy and expandable)
  std::uint64_t num_device_alloc = 0;      // segments taken and page ranges mapped
  std::uint64_t num_device_free = 0;       // segments returned and page ranges unmapped
  std::uint64_t num_alloc_retries = 0;     // allocations that emptied the cache and tried again
  std::uint64_t num_ooms = 0;              // allocations that failed after every retry
  std::uint64_t num_sync_all_streams = 0;  // synchronizations of every pending event
};

namespace detail {
class torch_expandable_segment;
}

/// @brief PyTorch's caching allocator over one device (see the design note at the top of this file).
class torch_caching_resource final : public memory_resource {
 public:
  /// @brief Reads the device's total memory once (for the memory fraction and the expandable ranges).
  torch_caching_resource(device& dev, const torch_allocator_config& config);
  /// @brief Returns every segment to the device, live blocks included.
  ~torch_caching_resource() override;

  std::string_view name() const noexcept override;
  free_space free_memory() const override;
  /// @brief torch.cuda.empty_cache(): waits for pending events, then frees every unsplit cached segment
  /// (and unmaps the free pages of expandable segments).
  void release_cached() override;
  void validate() const override;
  /// @brief stats() as named pairs, in the order of torch_allocator_stats.
  std::vector<std::pair<std::string, std::uint64_t>> counters() const override;
  /// @brief Tensor.record_stream: the block's memory is reused only after @p stream's work queued at its free.
  /// @throws usage_error when @p p is not a live block.
  void record_stream(device_ptr p, stream_id stream) override;

  const torch_allocator_config& config() const noexcept { return config_; }
  const torch_allocator_stats& stats() const noexcept { return stats_; }
  /// @brief Bytes the allocator may hold from the device (the memory fraction), or none.
  std::optional<std::size_t> memory_limit() const noexcept { return limit_; }

 protected:
  device_ptr do_allocate(std::size_t bytes, stream_id stream) override;
  void do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) override;

 private:
  using block = detail::torch_block;
  using block_pool = detail::torch_block_pool;

  struct alloc_params {
    stream_id stream = 0;
    std::size_t size = 0;        // rounded request
    std::size_t alloc_size = 0;  // segment size if a new legacy segment is needed
    block_pool* pool = nullptr;
    block* found = nullptr;
  };
  struct pending_event {
    event_id event = 0;
    block* owner = nullptr;
  };

  // Search, split, free and merge (torch_caching_resource.cpp).
  static std::size_t allocation_size(std::size_t size) noexcept;
  bool get_free_block(alloc_params& p);
  bool should_split(const block& b, std::size_t size) const noexcept;
  block* alloc_found_block(const alloc_params& p, std::size_t requested, bool split);
  void free_block(block* b);
  std::size_t try_merge(block* dst, block* src);

  // Taking and returning segments.
  bool alloc_block(alloc_params& p, bool retry);
  bool release_available_cached_blocks(const alloc_params& p);
  bool release_cached_blocks();
  void release_blocks(block_pool& pool);
  void release_block(block* b);
  void garbage_collect_cached_blocks();

  // Streams and events.
  void insert_events(block* b);
  void process_events();
  void synchronize_and_free_events();
  event_id take_event();

  // Expandable segments (torch_expandable_resource.cpp).
  block* find_expandable_block(stream_id stream, block_pool& pool, std::size_t size);
  bool map_block(block* to_map, std::size_t size);
  block* try_allocate_expandable_block(stream_id stream, block_pool& pool, std::size_t size);
  void unmap_block(block* b);
  void release_expandable_segment(block* b);
  void destroy_expandable_segments() noexcept;

  void check_neighbourhood(const block* b) const;
  void validate_segment(const block* head, std::size_t& blocks_seen) const;

  torch_allocator_config config_;
  torch_allocator_stats stats_;
  std::size_t device_total_ = 0;
  std::optional<std::size_t> limit_;
  std::pmr::unsynchronized_pool_resource nodes_;  // set and map nodes; declared before their users
  detail::torch_block_arena arena_;
  block_pool small_;
  block_pool large_;
  std::pmr::unordered_map<device_ptr, block*> live_;
  std::unordered_map<device_ptr, std::size_t> legacy_segments_;  // base -> bytes
  std::vector<std::unique_ptr<detail::torch_expandable_segment>> expandable_;
  std::map<stream_id, std::deque<pending_event>> events_;  // by the stream each event was recorded on
  std::vector<event_id> spare_events_;
  std::vector<block*> scratch_;
};

/// @brief The "torch-native" policy: PyTorch's caching allocator with cudaMalloc segments.
/// @throws usage_error for an unknown or invalid option (see torch_allocator_config::parse).
std::unique_ptr<memory_resource> make_torch_native_resource(device& dev, const policy_options& options);

}  // namespace vram
