#pragma once
// rmm-pool: an emulation of RMM's pool_memory_resource over cuda_memory_resource (RMM 26.08), the
// coalescing best-fit suballocator most RAPIDS programs run on. Rules followed (docs/emulations/rmm.md):
//  - sizes round up to the alignment unit (RMM: 256 B; here 512 B by default, to keep vram's promise that
//    every block is 512-aligned; `alignment=256` gives RMM's exact sizes);
//  - the pool starts with one upstream block of initial_pool_size (RMM's Python default: half of the
//    device's free memory, rounded down to the unit) and never gives memory back while it lives;
//  - free blocks sit in one address-ordered free list per stream; a freed block merges with free
//    neighbours in its list that come from the same upstream block, never across upstream blocks;
//  - an allocation takes the smallest fitting block (lowest address on ties) from its own stream's list;
//    failing that, the first other stream's list (in event order) with a fitting block, with a GPU-side
//    wait on that stream's event (no host synchronisation); failing that, it merges the other streams'
//    lists into its own one by one, trying after each; failing that, the pool grows;
//  - growth asks the device for max(size, pool size) without a maximum, or max(size, remaining / 2) with
//    one; when the device refuses, it halves the ask down to the request itself, then gives up.
// Each deallocate records the freeing stream's event, as RMM does.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vram/resource/memory_resource.hpp"
#include "vram/resource/policy_options.hpp"

namespace vram {

/// @brief Settings of rmm-pool, as pool_memory_resource's constructor takes them.
struct rmm_pool_options {
  /// Bytes of the first upstream block; unset: half of the device's free memory, rounded down to the unit.
  std::optional<std::size_t> initial_pool_size;
  /// The pool never grows past this; unset: no limit but the device.
  std::optional<std::size_t> maximum_pool_size;
  /// Size rounding unit and pointer alignment: RMM uses 256; vram promises 512. 256 or 512.
  std::size_t alignment = 512;
};

namespace detail {

/// @brief A free range of the pool. head: it starts an upstream block, so it never merges with what precedes it.
struct rmm_block {
  device_ptr ptr = 0;
  std::size_t size = 0;
  bool head = false;
};

/// @brief Free blocks of one stream, ordered by address and indexed by size: RMM's coalescing_free_list
/// with O(log n) best fit. Nodes of erased entries are kept and reused, so steady state allocates nothing.
class rmm_free_list {
 public:
  struct extent {
    std::size_t size;
    bool head;
  };
  using by_address = std::map<device_ptr, extent>;
  using by_size = std::set<std::pair<std::size_t, device_ptr>>;
  /// @brief Spare container nodes, shared by the lists of one pool.
  struct node_cache {
    std::vector<by_address::node_type> address_nodes;
    std::vector<by_size::node_type> size_nodes;
  };

  explicit rmm_free_list(node_cache& cache) noexcept : cache_(&cache) {}
  rmm_free_list(const rmm_free_list&) = delete;
  rmm_free_list& operator=(const rmm_free_list&) = delete;
  ~rmm_free_list();

  /// @brief Adds @p b, merging it with contiguous neighbours of the same upstream block.
  /// pre: @p b overlaps no block of the list.
  void insert(const rmm_block& b);
  /// @brief Removes and returns the smallest block of at least @p size bytes (lowest address on ties).
  std::optional<rmm_block> take_best_fit(std::size_t size);
  /// @brief Moves every block of @p other into this list, merging as insert does; @p other ends empty.
  void absorb(rmm_free_list& other);

  std::size_t bytes() const noexcept { return bytes_; }
  std::size_t count() const noexcept { return address_.size(); }
  bool empty() const noexcept { return address_.empty(); }
  std::size_t largest() const noexcept { return size_.empty() ? 0 : size_.rbegin()->first; }
  const by_address& blocks() const noexcept { return address_; }
  /// @brief Sorted, non-overlapping, fully merged, both indexes agree, byte count right.
  void validate() const;

 private:
  void add_size_entry(std::size_t size, device_ptr p);
  void remove_size_entry(std::size_t size, device_ptr p);
  void resize_entry(by_address::iterator it, std::size_t new_size);
  void erase_address(by_address::iterator it);

  node_cache* cache_;
  by_address address_;
  by_size size_;
  std::size_t bytes_ = 0;
};

}  // namespace detail

/// @brief RMM's pool_memory_resource over cuda_memory_resource, on a vram device.
class rmm_pool_resource final : public memory_resource {
 public:
  /// @throws usage_error for sizes that are not multiples of the unit or an initial size above the maximum;
  /// out_of_memory when the device cannot give the initial pool.
  rmm_pool_resource(device& dev, const rmm_pool_options& options = {});
  ~rmm_pool_resource() override;

  std::string_view name() const noexcept override { return "rmm-pool"; }
  free_space free_memory() const override;
  /// @brief RMM's pool never shrinks while it lives: this gives nothing back.
  void release_cached() override {}
  void validate() const override;

  /// @brief Bytes held from the device (RMM's pool_size()).
  std::size_t pool_size() const noexcept { return reserved_; }
  std::size_t alignment() const noexcept { return unit_; }
  /// @brief Sizes of the upstream blocks, in address order.
  std::vector<std::size_t> upstream_block_sizes() const;
  /// @brief Every free block of every stream's list as (address, size), in address order.
  std::vector<std::pair<device_ptr, std::size_t>> free_blocks() const;
  /// @brief The free blocks of one stream's list, in address order (empty if it has none).
  std::vector<std::pair<device_ptr, std::size_t>> free_blocks(stream_id stream) const;
  /// @brief cudaStreamWaitEvent calls the real pool would have made (taking or merging another stream's
  /// blocks). The device seam has no such call, so they are counted here.
  std::uint64_t stream_waits() const noexcept { return stream_waits_; }

 protected:
  device_ptr do_allocate(std::size_t bytes, stream_id stream) override;
  void do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) override;

 private:
  struct stream_list {
    stream_list(stream_id s, detail::rmm_free_list::node_cache& cache) : stream(s), blocks(cache) {}
    stream_id stream;
    detail::rmm_free_list blocks;
  };
  struct live_block {
    std::size_t size;       // rounded
    std::size_t requested;  // as asked
    bool head;
  };
  using list_map = std::map<event_id, stream_list>;

  event_id event_for(stream_id s);
  std::optional<detail::rmm_block> get_block(std::size_t size, event_id ev, stream_id s);
  detail::rmm_block split(const detail::rmm_block& b, std::size_t size, detail::rmm_free_list& rest_to);
  std::size_t size_to_grow(std::size_t size) const;
  std::optional<detail::rmm_block> try_to_expand(std::size_t try_size, std::size_t min_size);

  std::size_t unit_;
  std::optional<std::size_t> maximum_;
  detail::rmm_free_list::node_cache cache_;
  list_map lists_;                                  // RMM orders its per-stream lists by event
  std::unordered_map<stream_id, event_id> events_;  // one event per stream, made on first use
  std::map<device_ptr, std::size_t> upstream_;      // blocks from legacy_malloc
  std::unordered_map<device_ptr, live_block> live_;
  std::uint64_t stream_waits_ = 0;
};

/// @brief Makes rmm-pool from policy settings: initial_pool_size, maximum_pool_size (sizes such as 4GiB)
/// and alignment (256 or 512). @throws usage_error for an unknown key or a bad value.
std::unique_ptr<memory_resource> make_rmm_pool_resource(device& dev, const policy_options& options);

}  // namespace vram
