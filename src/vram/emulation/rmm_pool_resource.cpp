// rmm-pool: RMM's pool_memory_resource on the device seam. The free list (address map + size index) comes
// first, then the stream-ordered pool that owns one list per stream. Rules and sources: docs/emulations/rmm.md.
#include "vram/emulation/rmm_pool_resource.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <tuple>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/device.hpp"

namespace vram {
namespace detail {

namespace {
// Spare nodes kept per pool; beyond this, erased nodes are freed (a merge of a long list can release many).
constexpr std::size_t max_spare_nodes = 4096;
}  // namespace

rmm_free_list::~rmm_free_list() = default;

void rmm_free_list::add_size_entry(std::size_t size, device_ptr p) {
  if (!cache_->size_nodes.empty()) {
    auto node = std::move(cache_->size_nodes.back());
    cache_->size_nodes.pop_back();
    node.value() = {size, p};
    size_.insert(std::move(node));
  } else {
    size_.emplace(size, p);
  }
}

void rmm_free_list::remove_size_entry(std::size_t size, device_ptr p) {
  auto node = size_.extract(std::pair{size, p});
  if (node && cache_->size_nodes.size() < max_spare_nodes) cache_->size_nodes.push_back(std::move(node));
}

void rmm_free_list::resize_entry(by_address::iterator it, std::size_t new_size) {
  auto node = size_.extract(std::pair{it->second.size, it->first});
  node.value().first = new_size;
  size_.insert(std::move(node));
  it->second.size = new_size;
}

void rmm_free_list::erase_address(by_address::iterator it) {
  auto node = address_.extract(it);
  if (cache_->address_nodes.size() < max_spare_nodes) cache_->address_nodes.push_back(std::move(node));
}

void rmm_free_list::insert(const rmm_block& b) {
  bytes_ += b.size;
  auto next = address_.upper_bound(b.ptr);
  auto prev = next == address_.begin() ? address_.end() : std::prev(next);
  const bool merge_prev = prev != address_.end() && prev->first + prev->second.size == b.ptr && !b.head;
  const bool merge_next = next != address_.end() && b.ptr + b.size == next->first && !next->second.head;

  if (merge_prev && merge_next) {
    const std::size_t total = prev->second.size + b.size + next->second.size;
    remove_size_entry(next->second.size, next->first);
    erase_address(next);
    resize_entry(prev, total);
  } else if (merge_prev) {
    resize_entry(prev, prev->second.size + b.size);
  } else if (merge_next) {
    // The merged block starts at b: re-key next's node rather than make a new one.
    const std::size_t total = b.size + next->second.size;
    remove_size_entry(next->second.size, next->first);
    auto hint = std::next(next);
    auto node = address_.extract(next);
    node.key() = b.ptr;
    node.mapped() = extent{total, b.head};
    address_.insert(hint, std::move(node));
    add_size_entry(total, b.ptr);
  } else {
    if (!cache_->address_nodes.empty()) {
      auto node = std::move(cache_->address_nodes.back());
      cache_->address_nodes.pop_back();
      node.key() = b.ptr;
      node.mapped() = extent{b.size, b.head};
      address_.insert(next, std::move(node));
    } else {
      address_.emplace_hint(next, b.ptr, extent{b.size, b.head});
    }
    add_size_entry(b.size, b.ptr);
  }
}

std::optional<rmm_block> rmm_free_list::take_best_fit(std::size_t size) {
  auto it = size_.lower_bound(std::pair<std::size_t, device_ptr>{size, 0});
  if (it == size_.end()) return std::nullopt;
  const auto [found_size, p] = *it;
  auto at = address_.find(p);
  const rmm_block b{p, found_size, at->second.head};
  auto node = size_.extract(it);
  if (cache_->size_nodes.size() < max_spare_nodes) cache_->size_nodes.push_back(std::move(node));
  erase_address(at);
  bytes_ -= found_size;
  return b;
}

void rmm_free_list::absorb(rmm_free_list& other) {
  for (const auto& [p, e] : other.address_) insert(rmm_block{p, e.size, e.head});
  while (!other.address_.empty()) other.erase_address(other.address_.begin());
  while (!other.size_.empty()) {
    auto node = other.size_.extract(other.size_.begin());
    if (cache_->size_nodes.size() < max_spare_nodes) cache_->size_nodes.push_back(std::move(node));
  }
  other.bytes_ = 0;
}

void rmm_free_list::validate() const {
  if (address_.size() != size_.size()) {
    throw invariant_error(fmt::format("rmm free list: {} blocks by address but {} by size", address_.size(),
                                      size_.size()));
  }
  std::size_t sum = 0;
  device_ptr prev_end = 0;
  bool first = true;
  for (const auto& [p, e] : address_) {
    if (e.size == 0) throw invariant_error(fmt::format("rmm free list: empty block at {:#x}", p));
    if (!first && p < prev_end) throw invariant_error(fmt::format("rmm free list: block at {:#x} overlaps its predecessor", p));
    if (!first && p == prev_end && !e.head) {
      throw invariant_error(fmt::format("rmm free list: block at {:#x} is not merged with its contiguous predecessor", p));
    }
    if (!size_.contains(std::pair{e.size, p})) {
      throw invariant_error(fmt::format("rmm free list: block at {:#x} of {} bytes missing from the size index", p, e.size));
    }
    sum += e.size;
    prev_end = p + e.size;
    first = false;
  }
  if (sum != bytes_) throw invariant_error(fmt::format("rmm free list: holds {} bytes but counts {}", sum, bytes_));
}

}  // namespace detail

rmm_pool_resource::rmm_pool_resource(device& dev, const rmm_pool_options& options)
    : memory_resource(dev), unit_(options.alignment), maximum_(options.maximum_pool_size) {
  if (unit_ != 256 && unit_ != 512) {
    throw usage_error(fmt::format("rmm-pool: alignment {} must be 256 (RMM's) or 512 (vram's promise)", unit_));
  }
  if (maximum_ && *maximum_ % unit_ != 0) {
    throw usage_error(fmt::format("rmm-pool: maximum_pool_size {} is not a multiple of the alignment {}", *maximum_, unit_));
  }
  // RMM's Python PoolMemoryResource default: half of the free device memory, aligned down.
  const std::size_t initial =
      options.initial_pool_size ? *options.initial_pool_size : dev.mem_info().free / 2 / unit_ * unit_;
  if (initial % unit_ != 0) {
    throw usage_error(fmt::format("rmm-pool: initial_pool_size {} is not a multiple of the alignment {}", initial, unit_));
  }
  if (maximum_ && initial > *maximum_) {
    throw usage_error(fmt::format("rmm-pool: initial_pool_size {} exceeds maximum_pool_size {}", initial, *maximum_));
  }
  if (initial > 0) {
    auto block = try_to_expand(initial, initial);
    if (!block) {
      throw out_of_memory(fmt::format("rmm-pool: the device cannot give the initial pool of {} ({} bytes); {} of {} "
                                      "bytes are free. Try a smaller initial_pool_size.",
                                      format_bytes(initial), initial, dev.mem_info().free, dev.mem_info().total));
    }
    const event_id ev = event_for(0);
    lists_.try_emplace(ev, stream_id{0}, cache_).first->second.blocks.insert(*block);
  }
}

rmm_pool_resource::~rmm_pool_resource() {
  // RMM frees the upstream blocks first, then synchronizes and destroys each stream's event.
  try {
    for (const auto& [p, size] : upstream_) device_->legacy_free(p);
    for (const auto& [s, ev] : events_) {
      device_->event_synchronize(ev);
      device_->event_destroy(ev);
    }
  } catch (...) {
    // A destructor must not throw; the device is being torn down or was misused elsewhere.
  }
}

event_id rmm_pool_resource::event_for(stream_id s) {
  auto it = events_.find(s);
  if (it != events_.end()) return it->second;
  const event_id ev = device_->event_create();
  events_.emplace(s, ev);
  return ev;
}

detail::rmm_block rmm_pool_resource::split(const detail::rmm_block& b, std::size_t size,
                                           detail::rmm_free_list& rest_to) {
  if (b.size > size) rest_to.insert(detail::rmm_block{b.ptr + size, b.size - size, false});
  return detail::rmm_block{b.ptr, size, b.head};
}

std::size_t rmm_pool_resource::size_to_grow(std::size_t size) const {
  if (maximum_) {
    // RMM subtracts without a check; where rounding has carried the pool past the maximum we take 0 left.
    const std::size_t left = *maximum_ > reserved_ ? *maximum_ - reserved_ : 0;
    const std::size_t remaining = round_up(left, unit_);
    return size <= remaining ? std::max(size, remaining / 2) : 0;
  }
  return std::max(size, reserved_);
}

std::optional<detail::rmm_block> rmm_pool_resource::try_to_expand(std::size_t try_size, std::size_t min_size) {
  while (try_size >= min_size && try_size > 0) {
    const device_ptr p = device_->legacy_malloc(try_size);
    if (p != 0) {
      upstream_.emplace(p, try_size);
      reserved_ += try_size;
      return detail::rmm_block{p, try_size, true};
    }
    if (try_size == min_size) break;
    try_size = std::max(min_size, try_size / 2);
  }
  return std::nullopt;
}

std::optional<detail::rmm_block> rmm_pool_resource::get_block(std::size_t size, event_id ev, stream_id s) {
  // 1. The stream's own list: no wait needed.
  auto own_it = lists_.find(ev);
  if (own_it != lists_.end()) {
    if (auto b = own_it->second.blocks.take_best_fit(size)) return split(*b, size, own_it->second.blocks);
  } else {
    own_it = lists_.try_emplace(ev, s, cache_).first;
  }
  detail::rmm_free_list& own = own_it->second.blocks;

  // 2. The first other list, in event order, with a fitting block; the rest stays in that list.
  for (auto it = lists_.begin(); it != lists_.end(); ++it) {
    if (it == own_it) continue;
    if (auto b = it->second.blocks.take_best_fit(size)) {
      ++stream_waits_;
      return split(*b, size, it->second.blocks);
    }
  }

  // 3. Merge the other lists into ours one at a time; merging may join blocks that were apart.
  for (auto it = lists_.begin(); it != lists_.end();) {
    if (it == own_it) {
      ++it;
      continue;
    }
    own.absorb(it->second.blocks);
    ++stream_waits_;
    it = lists_.erase(it);
    if (auto b = own.take_best_fit(size)) return split(*b, size, own);
  }

  // 4. Grow the pool; the rest of the new upstream block joins our list.
  auto grown = try_to_expand(size_to_grow(size), size);
  if (!grown) return std::nullopt;
  return split(*grown, size, own);
}

device_ptr rmm_pool_resource::do_allocate(std::size_t bytes, stream_id stream) {
  if (bytes > SIZE_MAX - unit_) return 0;
  const event_id ev = event_for(stream);
  const std::size_t size = round_up(bytes, unit_);
  const auto b = get_block(size, ev, stream);
  if (!b) return 0;
  live_.emplace(b->ptr, live_block{size, bytes, b->head});
  allocated_ += size;
  return b->ptr;
}

void rmm_pool_resource::do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) {
  auto it = live_.find(p);
  if (it == live_.end()) {
    throw usage_error(fmt::format("rmm-pool: deallocate({:#x}, {} bytes): not a live block of this pool "
                                  "(never allocated here, or already freed)",
                                  p, bytes));
  }
  if (it->second.requested != bytes) {
    throw usage_error(fmt::format("rmm-pool: deallocate({:#x}, {} bytes): the block was allocated with {} bytes", p,
                                  bytes, it->second.requested));
  }
  const live_block block = it->second;
  const event_id ev = event_for(stream);
  device_->event_record(ev, stream);
  lists_.try_emplace(ev, stream, cache_).first->second.blocks.insert(detail::rmm_block{p, block.size, block.head});
  live_.erase(it);
  allocated_ -= block.size;
}

free_space rmm_pool_resource::free_memory() const {
  free_space fs;
  for (const auto& [ev, list] : lists_) {
    fs.total += list.blocks.bytes();
    fs.largest = std::max(fs.largest, list.blocks.largest());
  }
  return fs;
}

std::vector<std::size_t> rmm_pool_resource::upstream_block_sizes() const {
  std::vector<std::size_t> sizes;
  sizes.reserve(upstream_.size());
  for (const auto& [p, size] : upstream_) sizes.push_back(size);
  return sizes;
}

std::vector<std::pair<device_ptr, std::size_t>> rmm_pool_resource::free_blocks() const {
  std::vector<std::pair<device_ptr, std::size_t>> out;
  for (const auto& [ev, list] : lists_) {
    for (const auto& [p, e] : list.blocks.blocks()) out.emplace_back(p, e.size);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<device_ptr, std::size_t>> rmm_pool_resource::free_blocks(stream_id stream) const {
  std::vector<std::pair<device_ptr, std::size_t>> out;
  auto ev = events_.find(stream);
  if (ev == events_.end()) return out;
  auto list = lists_.find(ev->second);
  if (list == lists_.end()) return out;
  for (const auto& [p, e] : list->second.blocks.blocks()) out.emplace_back(p, e.size);
  return out;
}

void rmm_pool_resource::validate() const {
  struct range {
    device_ptr ptr;
    std::size_t size;
    bool head;
    bool free;
  };
  std::vector<range> all;
  all.reserve(live_.size() + 16);
  std::size_t free_sum = 0;
  std::size_t live_sum = 0;
  for (const auto& [ev, list] : lists_) {
    list.blocks.validate();
    for (const auto& [p, e] : list.blocks.blocks()) all.push_back(range{p, e.size, e.head, true});
    free_sum += list.blocks.bytes();
  }
  for (const auto& [p, b] : live_) {
    if (b.size != round_up(b.requested, unit_)) {
      throw invariant_error(fmt::format("rmm-pool: live block {:#x} has {} bytes for a request of {}", p, b.size, b.requested));
    }
    all.push_back(range{p, b.size, b.head, false});
    live_sum += b.size;
  }
  if (live_sum != allocated_) {
    throw invariant_error(fmt::format("rmm-pool: allocated bytes {} != sum of live blocks {}", allocated_, live_sum));
  }
  std::size_t upstream_sum = 0;
  for (const auto& [p, size] : upstream_) upstream_sum += size;
  if (upstream_sum != reserved_) {
    throw invariant_error(fmt::format("rmm-pool: reserved bytes {} != sum of upstream blocks {}", reserved_, upstream_sum));
  }
  if (free_sum + live_sum != reserved_) {
    throw invariant_error(fmt::format("rmm-pool: free {} + live {} bytes do not cover the pool of {} bytes", free_sum,
                                      live_sum, reserved_));
  }
  std::sort(all.begin(), all.end(), [](const range& a, const range& b) { return a.ptr < b.ptr; });
  device_ptr prev_end = 0;
  for (const range& r : all) {
    if (r.ptr < prev_end) throw invariant_error(fmt::format("rmm-pool: block at {:#x} overlaps its predecessor", r.ptr));
    auto up = upstream_.upper_bound(r.ptr);
    if (up == upstream_.begin()) {
      throw invariant_error(fmt::format("rmm-pool: block at {:#x} lies outside every upstream block", r.ptr));
    }
    --up;
    if (r.ptr + r.size > up->first + up->second) {
      throw invariant_error(fmt::format("rmm-pool: block at {:#x} crosses the end of its upstream block", r.ptr));
    }
    if ((r.ptr - up->first) % unit_ != 0) {
      throw invariant_error(fmt::format("rmm-pool: block at {:#x} is not a multiple of {} from its upstream block", r.ptr, unit_));
    }
    if (r.head != (r.ptr == up->first)) {
      throw invariant_error(fmt::format("rmm-pool: block at {:#x} has a wrong head flag", r.ptr));
    }
    prev_end = r.ptr + r.size;
  }
}

std::unique_ptr<memory_resource> make_rmm_pool_resource(device& dev, const policy_options& options) {
  rmm_pool_options o;
  for (const auto& [key, value] : options) {
    if (key == "initial_pool_size") {
      o.initial_pool_size = parse_size(value);
    } else if (key == "maximum_pool_size") {
      o.maximum_pool_size = parse_size(value);
    } else if (key == "alignment") {
      o.alignment = parse_size(value);
    } else {
      throw usage_error(fmt::format(
          "rmm-pool: unknown setting '{}' (known: initial_pool_size, maximum_pool_size, alignment)", key));
    }
  }
  return std::make_unique<rmm_pool_resource>(dev, o);
}

}  // namespace vram
