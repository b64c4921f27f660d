// Expandable segments: the page table of one segment, and the allocator paths that find room in a segment,
// map pages under blocks, unmap the pages of free blocks and drop empty segments.
#include "vram/emulation/torch_expandable_resource.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/device/device.hpp"
#include "vram/emulation/torch_caching_resource.hpp"

namespace vram {

namespace detail {

torch_expandable_segment::torch_expandable_segment(device& dev, stream_id stream, std::size_t page,
                                                   std::size_t address_space)
    : device_(&dev), stream_(stream), page_(page), max_pages_((address_space + page - 1) / page) {
  base_ = device_->address_reserve(page_ * max_pages_);
}

torch_expandable_segment::~torch_expandable_segment() {
  try {
    std::size_t i = 0;
    while (i < handles_.size()) {  // each mapped run, as PyTorch unmaps them
      if (handles_[i] == 0) {
        ++i;
        continue;
      }
      std::size_t end = i;
      while (end < handles_.size() && handles_[end] != 0) ++end;
      unmap_pages(i, end);
      i = end;
    }
    device_->address_free(base_, page_ * max_pages_);
  } catch (const error&) {
    // Nothing to recover when the device fails during teardown.
  }
}

std::size_t torch_expandable_segment::map(device_ptr p, std::size_t bytes) {
  const std::size_t begin = (p - base_) / page_;
  const std::size_t end = (p + bytes - base_ + page_ - 1) / page_;
  if (begin == end) return 0;
  if (handles_.size() < end) handles_.resize(end, 0);
  for (std::size_t i = begin; i < end; ++i) {
    const phys_handle h = device_->mem_create(page_);
    if (h == 0) {  // out of memory: give back this call's pages and map nothing
      for (std::size_t j = begin; j < i; ++j) {
        device_->mem_release(handles_[j]);
        handles_[j] = 0;
      }
      trim();
      return 0;
    }
    handles_[i] = h;
  }
  for (std::size_t i = begin; i < end; ++i) device_->mem_map(base_ + i * page_, page_, handles_[i]);
  device_->set_access(base_ + begin * page_, (end - begin) * page_);
  mapped_pages_ += end - begin;
  return (end - begin) * page_;
}

std::pair<device_ptr, std::size_t> torch_expandable_segment::unmap(device_ptr p, std::size_t bytes) {
  const std::size_t begin = (p - base_ + page_ - 1) / page_;
  const std::size_t end = (p + bytes - base_) / page_;
  if (begin >= end) return {p, 0};
  unmap_pages(begin, end);
  return {base_ + begin * page_, (end - begin) * page_};
}

void torch_expandable_segment::unmap_pages(std::size_t begin, std::size_t end) {
  // Unmapping does not wait for queued work, so PyTorch waits for the segment's stream first.
  device_->stream_synchronize(stream_);
  for (std::size_t i = begin; i < end; ++i) {
    device_->mem_unmap(base_ + i * page_, page_);
    device_->mem_release(handles_[i]);
    handles_[i] = 0;
  }
  mapped_pages_ -= end - begin;
  trim();
}

void torch_expandable_segment::trim() noexcept {
  while (!handles_.empty() && handles_.back() == 0) handles_.pop_back();
}

void torch_expandable_segment::validate() const {
  const auto mapped = static_cast<std::size_t>(std::count_if(handles_.begin(), handles_.end(),
                                                             [](phys_handle h) { return h != 0; }));
  if (mapped != mapped_pages_) {
    throw invariant_error(fmt::format("expandable segment at {:#x}: {} pages hold handles but {} are counted mapped",
                                      base_, mapped, mapped_pages_));
  }
  if (!handles_.empty() && (handles_.back() == 0 || handles_.size() > max_pages_)) {
    throw invariant_error(fmt::format("expandable segment at {:#x}: page table of {} entries is not trimmed or "
                                      "exceeds {} pages", base_, handles_.size(), max_pages_));
  }
}

}  // namespace detail

using detail::torch_block;
using detail::torch_block_key;

torch_caching_resource::block* torch_caching_resource::find_expandable_block(stream_id stream, block_pool& pool,
                                                                              std::size_t size) {
  // The lowest address, over this stream's segments, where free and unmapped blocks in a row hold size bytes;
  // a new segment when none has room.
  const auto allocatable = [](const block* b) { return b != nullptr && b->cached(); };
  const auto has_room = [&](const block* b) {
    std::size_t bytes = 0;
    while (bytes < size && allocatable(b)) {
      bytes += b->size;
      b = b->next;
    }
    return bytes >= size;
  };
  auto& unmapped = pool.unmapped();
  for (auto it = unmapped.lower_bound(torch_block_key{stream, 0, 0}); it != unmapped.end() && (*it)->stream == stream;
       ++it) {
    block* c = *it;
    if (allocatable(c->prev)) c = c->prev;  // a free block just before the unmapped range comes first
    if (has_room(c)) return c;
  }
  const std::size_t page = pool.small() ? detail::torch_small_buffer : detail::torch_large_buffer;
  // 9/8 of the device, so pages unmapped early in the range can be mapped again at its end.
  const std::size_t address_space = device_total_ + device_total_ / 8;
  expandable_.push_back(std::make_unique<detail::torch_expandable_segment>(*device_, stream, page, address_space));
  detail::torch_expandable_segment* es = expandable_.back().get();
  ++stats_.segments;
  block* c = arena_.make(es->base(), es->size(), stream, &pool);
  c->mapped = false;
  c->segment = es;
  unmapped.insert(c);
  return c;
}

bool torch_caching_resource::map_block(block* to_map, std::size_t size) {
  // pre: to_map is unmapped and size <= to_map->size. Maps whole pages from its start, leaves the rest unmapped,
  // and caches the mapped part merged with free neighbours.
  const std::size_t mapped = to_map->segment->map(to_map->ptr, size);
  if (mapped == 0) return false;
  block_pool& pool = *to_map->pool;
  pool.unmapped().erase(to_map);
  to_map->mapped = true;
  if (mapped < to_map->size) {
    block* rest = arena_.make(to_map->ptr + mapped, to_map->size - mapped, to_map->stream, &pool);
    rest->mapped = false;
    rest->segment = to_map->segment;
    rest->prev = to_map;
    rest->next = to_map->next;
    if (rest->next != nullptr) rest->next->prev = rest;
    to_map->next = rest;
    pool.unmapped().insert(rest);
    to_map->size = mapped;
  }
  try_merge(to_map, to_map->prev);
  try_merge(to_map, to_map->next);
  pool.insert(to_map);
  reserved_ += mapped;
  ++stats_.num_device_alloc;
  return true;
}

torch_caching_resource::block* torch_caching_resource::try_allocate_expandable_block(stream_id stream,
                                                                                      block_pool& pool,
                                                                                      std::size_t size) {
  // The candidate starts a run with room for size: unmapped, or free followed by unmapped.
  block* c = find_expandable_block(stream, pool, size);
  if (!c->mapped && !map_block(c, std::min(c->size, size))) return nullptr;
  while (c->size < size) {
    // c is free and followed by unmapped space: map what is missing; map_block merges c into the new part.
    block* next = c->next;
    if (!map_block(next, std::min(size - c->size, next->size))) return nullptr;
    c = next;
  }
  pool.erase(c);
  return c;
}

void torch_caching_resource::unmap_block(block* b) {
  // pre: b is a cached block of an expandable segment. Unmaps its whole pages; the parts before and after
  // them stay cached.
  const auto [ptr, bytes] = b->segment->unmap(b->ptr, b->size);
  if (bytes == 0) return;
  block_pool& pool = *b->pool;
  pool.erase(b);
  const std::size_t before = ptr - b->ptr;
  if (before > 0) {
    block* front = arena_.make(b->ptr, before, b->stream, &pool);
    front->segment = b->segment;
    front->prev = b->prev;
    front->next = b;
    if (front->prev != nullptr) front->prev->next = front;
    b->prev = front;
    pool.insert(front);
  }
  const std::size_t after = b->size - before - bytes;
  if (after > 0) {
    block* back = arena_.make(ptr + bytes, after, b->stream, &pool);
    back->segment = b->segment;
    back->prev = b;
    back->next = b->next;
    if (back->next != nullptr) back->next->prev = back;
    b->next = back;
    pool.insert(back);
  }
  b->ptr = ptr;
  b->size = bytes;
  b->mapped = false;
  try_merge(b, b->prev);
  try_merge(b, b->next);
  pool.unmapped().insert(b);
  reserved_ -= bytes;
  ++stats_.num_device_free;
}

void torch_caching_resource::release_expandable_segment(block* b) {
  // pre: b is the whole segment, unmapped.
  b->pool->unmapped().erase(b);
  const auto it = std::find_if(expandable_.begin(), expandable_.end(),
                               [&](const auto& es) { return es.get() == b->segment; });
  if (it != expandable_.end()) expandable_.erase(it);  // frees the address range
  --stats_.segments;
  arena_.recycle(b);
}

void torch_caching_resource::destroy_expandable_segments() noexcept { expandable_.clear(); }

std::unique_ptr<memory_resource> make_torch_expandable_resource(device& dev, const policy_options& options) {
  return std::make_unique<torch_caching_resource>(dev, torch_allocator_config::parse(options, true));
}

}  // namespace vram
