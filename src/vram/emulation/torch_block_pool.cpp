// The block arena and the free-block pools of the PyTorch caching allocator emulation.
#include "vram/emulation/torch_block_pool.hpp"

#include <algorithm>

namespace vram::detail {

torch_block* torch_block_arena::make(device_ptr ptr, std::size_t size, stream_id stream, torch_block_pool* pool) {
  if (free_.empty()) {
    chunks_.push_back(std::make_unique<torch_block[]>(chunk_blocks));
    torch_block* chunk = chunks_.back().get();
    free_.reserve(chunks_.size() * chunk_blocks);  // room for every block, so recycle never grows it
    for (std::size_t i = chunk_blocks; i-- > 0;) free_.push_back(&chunk[i]);
  }
  torch_block* b = free_.back();
  free_.pop_back();
  ++live_;
  b->ptr = ptr;
  b->size = size;
  b->requested = 0;
  b->stream = stream;
  b->prev = nullptr;
  b->next = nullptr;
  b->pool = pool;
  b->segment = nullptr;
  b->stream_uses.clear();  // keeps its capacity for the next record_stream
  b->event_count = 0;
  b->gc_count_base = 0;
  b->allocated = false;
  b->mapped = true;
  return b;
}

void torch_block_arena::recycle(torch_block* b) noexcept {
  b->prev = nullptr;
  b->next = nullptr;
  --live_;
  free_.push_back(b);  // never reallocates: capacity covers every block of every chunk
}

torch_block_pool::torch_block_pool(bool small, std::pmr::memory_resource* nodes)
    : blocks_(nodes), unmapped_(nodes), small_(small) {}

void torch_block_pool::insert(torch_block* b) {
  b->gc_count_base = searches_;
  blocks_.insert(b);
  free_bytes_ += b->size;
}

void torch_block_pool::erase(torch_block* b) {
  if (blocks_.erase(b) != 0) free_bytes_ -= b->size;
}

torch_block_pool::block_set::const_iterator torch_block_pool::erase(block_set::const_iterator it) {
  free_bytes_ -= (*it)->size;
  return blocks_.erase(it);
}

std::size_t torch_block_pool::largest_free() const {
  // The set is ordered by stream first: the last block of each stream is that stream's largest. Jump from
  // the end to the first block of each stream in turn.
  std::size_t largest = 0;
  auto it = blocks_.end();
  while (it != blocks_.begin()) {
    --it;
    largest = std::max(largest, (*it)->size);
    it = blocks_.lower_bound(torch_block_key{(*it)->stream, 0, 0});
  }
  return largest;
}

}  // namespace vram::detail
