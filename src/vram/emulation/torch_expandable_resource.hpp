#pragma once
// PyTorch's expandable segments (expandable_segments:True, "Note [Expandable Segments]" in
// c10/cuda/CUDACachingAllocator.cpp): instead of one cudaMalloc per segment, the allocator keeps one segment
// per (stream, pool) that reserves a virtual range of 9/8 of the device's memory and maps physical pages into
// it as blocks need them: 2 MiB pages for the small pool and 20 MiB pages (kLargeBuffer) for the large pool,
// each page its own physical handle (mem_create, mem_map, then one set_access over the new range). A new
// mapping goes to the lowest address of the segment where free and unmapped space together fit the request,
// normally its end. empty_cache (and the retry after a failed mapping) unmaps the whole pages of free blocks,
// after synchronizing the segment's stream, since unmapping does not wait for queued work.
// torch_expandable_segment is the page table of one segment; the allocator's expandable paths are members of
// torch_caching_resource defined in torch_expandable_resource.cpp.

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "vram/core/types.hpp"
#include "vram/resource/memory_resource.hpp"
#include "vram/resource/policy_options.hpp"

namespace vram {

namespace detail {

/// @brief One expandable segment: a reserved virtual range and the physical pages mapped into it.
class torch_expandable_segment {
 public:
  /// @brief Reserves ceil(@p address_space / @p page) pages of address space. pre: page is a multiple of the
  /// device's granularity.
  torch_expandable_segment(device& dev, stream_id stream, std::size_t page, std::size_t address_space);
  /// @brief Unmaps what is still mapped and frees the address range.
  ~torch_expandable_segment();
  torch_expandable_segment(const torch_expandable_segment&) = delete;
  torch_expandable_segment& operator=(const torch_expandable_segment&) = delete;

  device_ptr base() const noexcept { return base_; }
  std::size_t size() const noexcept { return page_ * max_pages_; }
  std::size_t page() const noexcept { return page_; }
  stream_id stream() const noexcept { return stream_; }
  /// @brief Bytes of the pages mapped now.
  std::size_t mapped_bytes() const noexcept { return mapped_pages_ * page_; }

  /// @brief Maps the pages that cover [p, p + bytes). pre: p is page-aligned and those pages are unmapped.
  /// @return the bytes mapped (bytes rounded up to whole pages), or 0 when the device has too little memory
  /// (then nothing is mapped).
  std::size_t map(device_ptr p, std::size_t bytes);
  /// @brief Unmaps the whole pages inside [p, p + bytes), after synchronizing the segment's stream.
  /// @return the unmapped range (address, bytes); bytes is 0 when no whole page lies inside.
  std::pair<device_ptr, std::size_t> unmap(device_ptr p, std::size_t bytes);

  /// @brief Checks the page table against mapped_bytes(); throws invariant_error.
  void validate() const;

 private:
  void unmap_pages(std::size_t begin, std::size_t end);
  void trim() noexcept;

  device* device_;
  stream_id stream_;
  std::size_t page_;
  std::size_t max_pages_;
  device_ptr base_ = 0;
  std::vector<phys_handle> handles_;  // by page index; 0: not mapped; no trailing zeros
  std::size_t mapped_pages_ = 0;
};

}  // namespace detail

/// @brief The "torch-expandable" policy: PyTorch's caching allocator with expandable_segments:True.
/// @throws usage_error for an unknown or invalid option (see torch_allocator_config::parse).
std::unique_ptr<memory_resource> make_torch_expandable_resource(device& dev, const policy_options& options);

}  // namespace vram
