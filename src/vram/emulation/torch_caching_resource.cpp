// PyTorch's caching allocator: options, search, split, merge, segments, streams and events. The expandable
// segment paths are in torch_expandable_resource.cpp. Function names follow PyTorch's, so the two can be read
// side by side; the code is this project's own.
#include "vram/emulation/torch_caching_resource.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <initializer_list>
#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/device/device.hpp"
#include "vram/emulation/torch_expandable_resource.hpp"

namespace vram {

using detail::torch_block;
using detail::torch_block_key;
using detail::torch_large_buffer;
using detail::torch_min_block;
using detail::torch_min_large_alloc;
using detail::torch_round_large;
using detail::torch_small_buffer;
using detail::torch_small_size;

// ---------------------------------------------------------------------------------------------------------
// Options

namespace {

constexpr std::string_view known_options =
    "max_split_size_mb, max_non_split_rounding_mb, garbage_collection_threshold, roundup_power2_divisions, "
    "per_process_memory_fraction, expandable_segments";

[[noreturn]] void bad_option(std::string_view key, std::string_view value, std::string_view why) {
  throw usage_error(fmt::format("torch allocator option {}={}: {}", key, value, why));
}

std::size_t to_size(std::string_view key, std::string_view text) {
  std::size_t v = 0;
  const auto* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc{} || p != end || text.empty()) bad_option(key, text, "expected a whole number, 0 or more");
  return v;
}

double to_double(std::string_view key, std::string_view text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(std::string(text), &used);
    if (used != text.size() || !std::isfinite(v)) bad_option(key, text, "expected a number");
    return v;
  } catch (const std::logic_error&) {
    bad_option(key, text, "expected a number");
  }
}

bool to_bool(std::string_view key, std::string_view text) {
  if (text == "True" || text == "true" || text == "1") return true;
  if (text == "False" || text == "false" || text == "0") return false;
  bad_option(key, text, "expected True or False");
}

std::size_t megabytes_at_least_20(std::string_view key, std::string_view text) {
  const std::size_t mb = to_size(key, text);
  if (mb < torch_large_buffer / MiB) bad_option(key, text, "must be >= 20 (MiB), as PyTorch requires");
  return std::min(mb, std::numeric_limits<std::size_t>::max() / MiB) * MiB;
}

// "4" sets every interval; "[256:4,1024:2,>:1]" sets intervals by their lower bound in MiB (a power of two),
// the first entry also covering the intervals below it and ">" the ones after the last entry.
void parse_divisions(std::string_view key, std::string_view text,
                     std::array<std::size_t, torch_allocator_config::divisions_intervals>& out) {
  out.fill(0);
  if (text.empty() || text.front() != '[') {
    const std::size_t v = to_size(key, text);
    if (!std::has_single_bit(v)) bad_option(key, text, "the divisions must be a power of two");
    out.fill(v);
    return;
  }
  if (text.back() != ']') bad_option(key, text, "expected a closing ']'");
  std::string_view body = text.substr(1, text.size() - 2);
  bool first = true;
  std::size_t last_index = 0;
  while (!body.empty()) {
    const auto sep = body.find_first_of(",| ");
    const std::string_view entry = body.substr(0, sep);
    body = sep == std::string_view::npos ? std::string_view{} : body.substr(sep + 1);
    if (entry.empty()) continue;
    const auto colon = entry.find(':');
    if (colon == std::string_view::npos) bad_option(key, text, "expected entries of the form bound:divisions");
    const std::string_view bound = entry.substr(0, colon);
    const std::size_t value = to_size(key, entry.substr(colon + 1));
    if (value != 0 && !std::has_single_bit(value)) bad_option(key, text, "divisions must be 0 or a power of two");
    if (bound == ">") {
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(std::min(last_index + 1, out.size())), out.end(), value);
      continue;
    }
    const std::size_t mb = to_size(key, bound);
    if (!std::has_single_bit(mb)) bad_option(key, text, "interval bounds must be powers of two (MiB)");
    const std::size_t index = std::min<std::size_t>(std::bit_width(mb) - 1, out.size() - 1);
    if (first) std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(index), value);
    first = false;
    out[index] = value;
    last_index = index;
  }
}

}  // namespace

torch_allocator_config torch_allocator_config::parse(const policy_options& options, bool expandable_default) {
  torch_allocator_config c;
  c.expandable_segments = expandable_default;
  for (const auto& [key, value] : options) {
    if (key == "max_split_size_mb") {
      c.max_split_size = megabytes_at_least_20(key, value);
    } else if (key == "max_non_split_rounding_mb") {
      c.max_non_split_rounding_size = megabytes_at_least_20(key, value);
    } else if (key == "garbage_collection_threshold") {
      c.garbage_collection_threshold = to_double(key, value);
      if (!(c.garbage_collection_threshold > 0 && c.garbage_collection_threshold < 1)) {
        bad_option(key, value, "must lie in (0, 1)");
      }
    } else if (key == "roundup_power2_divisions") {
      parse_divisions(key, value, c.roundup_power2_divisions);
    } else if (key == "per_process_memory_fraction") {
      c.per_process_memory_fraction = to_double(key, value);
      if (!(c.per_process_memory_fraction > 0 && c.per_process_memory_fraction <= 1)) {
        bad_option(key, value, "must lie in (0, 1]");
      }
    } else if (key == "expandable_segments") {
      c.expandable_segments = to_bool(key, value);
    } else {
      throw usage_error(fmt::format("torch allocator: unknown option '{}'; known options: {}", key, known_options));
    }
  }
  return c;
}

std::size_t torch_allocator_config::divisions_for(std::size_t size) const noexcept {
  // Interval i covers [2^(20+i), 2^(21+i)) bytes; sizes below 1 MiB use interval 0, sizes from 32 GiB the last.
  const std::size_t log_size = static_cast<std::size_t>(std::bit_width(size)) - 1;
  const std::size_t index = log_size > 20 ? log_size - 20 : 0;
  return roundup_power2_divisions[std::min(index, divisions_intervals - 1)];
}

std::size_t torch_allocator_config::round_size(std::size_t size) const noexcept {
  if (size < torch_min_block) return torch_min_block;
  const std::size_t divisions = divisions_for(size);
  if (divisions > 1 && size > torch_min_block * divisions) {
    // Round up to the next of `divisions` equal steps between the powers of two around size.
    if (std::has_single_bit(size)) return size;
    const std::size_t floor = std::bit_floor(size);
    const std::size_t step = floor >> (std::bit_width(divisions) - 1);
    if (step == 0) return floor << 1;
    const std::size_t down = size & ~(step - 1);
    return down == size ? size : down + step;
  }
  return round_up(size, torch_min_block);
}

// ---------------------------------------------------------------------------------------------------------
// Construction

torch_caching_resource::torch_caching_resource(device& dev, const torch_allocator_config& config)
    : memory_resource(dev),
      config_(config),
      small_(true, &nodes_),
      large_(false, &nodes_),
      live_(&nodes_) {
  device_total_ = dev.mem_info().total;
  if (config_.per_process_memory_fraction < 1.0) {
    limit_ = static_cast<std::size_t>(config_.per_process_memory_fraction * static_cast<double>(device_total_));
  }
  live_.reserve(1024);
}

torch_caching_resource::~torch_caching_resource() {
  try {
    for (auto& [stream, queue] : events_) {
      for (const auto& e : queue) device_->event_destroy(e.event);
    }
    for (event_id e : spare_events_) device_->event_destroy(e);
    for (const auto& [base, bytes] : legacy_segments_) device_->legacy_free(base);
  } catch (const error&) {
    // A device that fails while the allocator goes away leaves nothing to recover here.
  }
  destroy_expandable_segments();
}

std::vector<std::pair<std::string, std::uint64_t>> torch_caching_resource::counters() const {
  return {{"segments", stats_.segments},
          {"num_device_alloc", stats_.num_device_alloc},
          {"num_device_free", stats_.num_device_free},
          {"num_alloc_retries", stats_.num_alloc_retries},
          {"num_ooms", stats_.num_ooms},
          {"num_sync_all_streams", stats_.num_sync_all_streams}};
}

std::string_view torch_caching_resource::name() const noexcept {
  return config_.expandable_segments ? "torch-expandable" : "torch-native";
}

free_space torch_caching_resource::free_memory() const {
  return {small_.free_bytes() + large_.free_bytes(), std::max(small_.largest_free(), large_.largest_free())};
}

// ---------------------------------------------------------------------------------------------------------
// malloc and free

device_ptr torch_caching_resource::do_allocate(std::size_t bytes, stream_id stream) {
  process_events();
  alloc_params p;
  p.stream = stream;
  p.size = config_.round_size(bytes);
  p.pool = p.size <= torch_small_size ? &small_ : &large_;
  p.alloc_size = allocation_size(p.size);

  bool found = get_free_block(p);
  if (!found) {
    if (limit_ && config_.garbage_collection_threshold > 0.0) garbage_collect_cached_blocks();
    found = alloc_block(p, false) || (release_available_cached_blocks(p) && alloc_block(p, false)) ||
            (release_cached_blocks() && alloc_block(p, true));
  }
  if (!found) {
    ++stats_.num_ooms;
    return 0;
  }
  block* b = alloc_found_block(p, bytes, should_split(*p.found, p.size));
  live_.emplace(b->ptr, b);
#if VRAM_DEBUG_VALIDATE
  check_neighbourhood(b);
#endif
  return b->ptr;
}

void torch_caching_resource::do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) {
  (void)stream;  // as in PyTorch, a block returns to the stream it was allocated on
  const auto it = live_.find(p);
  if (it == live_.end()) {
    throw usage_error(fmt::format("{}: free of {:#x}, which is not a live block (never allocated, or freed twice)",
                                  name(), p));
  }
  block* b = it->second;
  if (bytes != b->requested) {
    throw usage_error(fmt::format("{}: free of {:#x} with {} bytes, but it was allocated with {} bytes", name(), p,
                                  bytes, b->requested));
  }
  live_.erase(it);
  b->allocated = false;
  allocated_ -= b->size;
  if (!b->stream_uses.empty()) {
    insert_events(b);
  } else {
    free_block(b);
  }
#if VRAM_DEBUG_VALIDATE
  check_neighbourhood(b);
#endif
}

void torch_caching_resource::record_stream(device_ptr p, stream_id stream) {
  const auto it = live_.find(p);
  if (it == live_.end()) {
    throw usage_error(fmt::format("{}: record_stream on {:#x}, which is not a live block", name(), p));
  }
  block* b = it->second;
  if (stream == b->stream) return;  // uses on the allocation stream need no event
  if (std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end()) {
    b->stream_uses.push_back(stream);
  }
}

void torch_caching_resource::release_cached() { release_cached_blocks(); }

// ---------------------------------------------------------------------------------------------------------
// Search, split, merge

std::size_t torch_caching_resource::allocation_size(std::size_t size) noexcept {
  if (size <= torch_small_size) return torch_small_buffer;
  if (size < torch_min_large_alloc) return torch_large_buffer;
  return round_up(size, torch_round_large);
}

bool torch_caching_resource::get_free_block(alloc_params& p) {
  block_pool& pool = *p.pool;
  if (limit_ && config_.garbage_collection_threshold > 0.0) pool.count_search();
  auto it = pool.lower_bound(torch_block_key{p.stream, p.size, 0});
  if (it == pool.blocks().end() || (*it)->stream != p.stream) return false;

  if ((*it)->segment != nullptr) {
    // A free block followed by unmapped pages can grow into them: for best fit, count what it can grow to.
    const auto expandable_size = [](const block* b) {
      return b->size + (b->next != nullptr && !b->next->mapped ? b->next->size : 0);
    };
    auto next = std::next(it);
    while ((*it)->segment != nullptr && next != pool.blocks().end() && (*next)->stream == p.stream &&
           expandable_size(*next) < expandable_size(*it)) {
      it = next++;
    }
  }
  // An oversize block serves only oversize requests, and only within max_non_split_rounding of its size.
  if (p.size < config_.max_split_size && (*it)->size >= config_.max_split_size) return false;
  if (p.size >= config_.max_split_size && (*it)->size >= p.size + config_.max_non_split_rounding_size) return false;
  p.found = *it;
  pool.erase(it);
  return true;
}

bool torch_caching_resource::should_split(const block& b, std::size_t size) const noexcept {
  const std::size_t remaining = b.size - size;
  if (b.pool->small() || config_.expandable_segments) return remaining >= torch_min_block;
  return size < config_.max_split_size && remaining > torch_small_size;
}

torch_caching_resource::block* torch_caching_resource::alloc_found_block(const alloc_params& p,
                                                                          std::size_t requested, bool split) {
  // pre: p.found is in no set. The front part is handed out; the rest goes back to the pool.
  block* b = p.found;
  if (split) {
    block* rest = b;
    b = arena_.make(rest->ptr, p.size, p.stream, p.pool);
    b->segment = rest->segment;
    b->prev = rest->prev;
    if (b->prev != nullptr) b->prev->next = b;
    b->next = rest;
    rest->prev = b;
    rest->ptr += p.size;
    rest->size -= p.size;
    p.pool->insert(rest);
  }
  b->allocated = true;
  b->requested = requested;
  allocated_ += b->size;
  return b;
}

void torch_caching_resource::free_block(block* b) {
  // pre: b is cached() and in no set.
  try_merge(b, b->prev);
  try_merge(b, b->next);
  b->pool->insert(b);
}

std::size_t torch_caching_resource::try_merge(block* dst, block* src) {
  // pre: dst is in no set. Merges src into dst when src is cached and mapped alike.
  if (src == nullptr || !src->cached() || dst->mapped != src->mapped) return 0;
  if (dst->prev == src) {
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev != nullptr) dst->prev->next = dst;
  } else {
    dst->next = src->next;
    if (dst->next != nullptr) dst->next->prev = dst;
  }
  const std::size_t subsumed = src->size;
  dst->size += subsumed;
  if (src->mapped) {
    src->pool->erase(src);
  } else {
    src->pool->unmapped().erase(src);
  }
  arena_.recycle(src);
  return subsumed;
}

// ---------------------------------------------------------------------------------------------------------
// Segments

bool torch_caching_resource::alloc_block(alloc_params& p, bool retry) {
  if (retry) ++stats_.num_alloc_retries;
  if (limit_ && reserved_ + p.alloc_size > *limit_) return false;
  if (config_.expandable_segments) {
    p.found = try_allocate_expandable_block(p.stream, *p.pool, p.size);
    return p.found != nullptr;
  }
  const device_ptr ptr = device_->legacy_malloc(p.alloc_size);
  if (ptr == 0) return false;
  reserved_ += p.alloc_size;
  legacy_segments_.emplace(ptr, p.alloc_size);
  ++stats_.segments;
  ++stats_.num_device_alloc;
  p.found = arena_.make(ptr, p.alloc_size, p.stream, p.pool);
  return true;
}

bool torch_caching_resource::release_available_cached_blocks(const alloc_params& p) {
  // Frees cached oversize blocks of the request's stream: the smallest one that covers the request, or else
  // the largest ones until their bytes cover it.
  if (config_.max_split_size == SIZE_MAX) return false;
  block_pool& pool = *p.pool;
  const std::size_t target = std::max(p.size, config_.max_split_size);
  auto it = pool.lower_bound(torch_block_key{p.stream, target, 0});
  if (it == pool.blocks().end() || (*it)->stream != p.stream || (*it)->segment != nullptr) {
    if (it == pool.blocks().begin()) return false;
    std::size_t released = 0;
    --it;
    while (released < target && (*it)->size >= config_.max_split_size && (*it)->stream == p.stream) {
      const auto cur = it;
      const bool first = cur == pool.blocks().begin();
      if (!first) --it;
      // Oversize cached blocks are never split (a split leaves both parts below max_split_size); the test
      // only keeps a broken invariant from freeing part of a segment.
      if ((*cur)->segment == nullptr && !(*cur)->is_split()) {
        released += (*cur)->size;
        release_block(*cur);
      }
      if (first) break;
    }
    return released >= target;
  }
  if ((*it)->is_split()) return false;
  release_block(*it);
  return true;
}

bool torch_caching_resource::release_cached_blocks() {
  synchronize_and_free_events();
  release_blocks(large_);
  release_blocks(small_);
  return true;
}

void torch_caching_resource::release_blocks(block_pool& pool) {
  scratch_.clear();
  for (auto it = pool.blocks().begin(); it != pool.blocks().end();) {
    block* b = *it;
    ++it;
    if (b->segment != nullptr) {
      scratch_.push_back(b);  // unmapping changes the set: do it after the walk
    } else if (!b->is_split()) {
      release_block(b);
    }
  }
  for (block* b : scratch_) {
    unmap_block(b);
    if (!b->is_split()) release_expandable_segment(b);
  }
  scratch_.clear();
}

void torch_caching_resource::release_block(block* b) {
  // pre: b is a whole legacy segment, cached in its pool.
  device_->legacy_free(b->ptr);
  reserved_ -= b->size;
  legacy_segments_.erase(b->ptr);
  --stats_.segments;
  ++stats_.num_device_free;
  b->pool->erase(b);
  arena_.recycle(b);
}

void torch_caching_resource::garbage_collect_cached_blocks() {
  // Frees unsplit cached blocks of the large pool whose age (searches since they were cached) is at least the
  // mean age, repeating until the bytes held fall to the threshold share of the limit.
  const auto threshold =
      static_cast<std::size_t>(config_.garbage_collection_threshold * static_cast<double>(*limit_));
  if (reserved_ <= threshold) return;
  const std::size_t target = reserved_ - threshold;
  std::int64_t total_age = 0;
  std::int64_t freeable = 0;
  for (const block* b : large_.blocks()) {
    if (!b->is_split()) {
      total_age += large_.age(*b);
      ++freeable;
    }
  }
  if (freeable == 0) return;
  std::size_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && freeable > 0) {
    const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
    freed = false;
    for (auto it = large_.blocks().begin(); it != large_.blocks().end();) {
      block* b = *it;
      ++it;
      if (!b->is_split() && b->segment == nullptr && static_cast<double>(large_.age(*b)) >= age_threshold) {
        freed = true;
        reclaimed += b->size;
        total_age -= large_.age(*b);
        --freeable;
        release_block(b);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Streams and events

event_id torch_caching_resource::take_event() {
  if (spare_events_.empty()) return device_->event_create();
  const event_id e = spare_events_.back();
  spare_events_.pop_back();
  return e;
}

void torch_caching_resource::insert_events(block* b) {
  // One event on each stream that used the block; it returns to the pool when all of them complete.
  for (stream_id s : b->stream_uses) {
    const event_id e = take_event();
    device_->event_record(e, s);
    ++b->event_count;
    events_[s].push_back(pending_event{e, b});
  }
  b->stream_uses.clear();
}

void torch_caching_resource::process_events() {
  for (auto it = events_.begin(); it != events_.end();) {
    auto& queue = it->second;
    while (!queue.empty()) {
      const pending_event e = queue.front();
      if (!device_->event_query(e.event)) break;  // later events of this stream are not done either
      queue.pop_front();
      spare_events_.push_back(e.event);
      if (--e.owner->event_count == 0) free_block(e.owner);
    }
    it = queue.empty() ? events_.erase(it) : std::next(it);
  }
}

void torch_caching_resource::synchronize_and_free_events() {
  ++stats_.num_sync_all_streams;
  for (auto& [stream, queue] : events_) {
    for (const pending_event& e : queue) {
      device_->event_synchronize(e.event);
      spare_events_.push_back(e.event);
      if (--e.owner->event_count == 0) free_block(e.owner);
    }
  }
  events_.clear();
}

// ---------------------------------------------------------------------------------------------------------
// Invariants

namespace {
[[noreturn]] void broken(std::string_view what) { throw invariant_error(fmt::format("torch allocator: {}", what)); }
}  // namespace

void torch_caching_resource::check_neighbourhood(const block* b) const {
  // The cheap local part of validate(), run after each call in debug builds.
  for (const block* n : std::initializer_list<const block*>{b->prev, b, b->next}) {
    if (n == nullptr) continue;
    if (n->prev != nullptr && (n->prev->next != n || n->prev->ptr + n->prev->size != n->ptr)) {
      broken(fmt::format("block {:#x} and the one before it do not link up", n->ptr));
    }
    if (n->next != nullptr && (n->next->prev != n || n->ptr + n->size != n->next->ptr)) {
      broken(fmt::format("block {:#x} and the one after it do not link up", n->ptr));
    }
    if (n->next != nullptr && n->cached() && n->next->cached() && n->mapped == n->next->mapped) {
      broken(fmt::format("free neighbours {:#x} and {:#x} were not merged", n->ptr, n->next->ptr));
    }
  }
}

void torch_caching_resource::validate_segment(const block* head, std::size_t& blocks_seen) const {
  std::size_t total = 0;
  std::size_t mapped = 0;
  for (const block* b = head; b != nullptr; b = b->next) {
    ++blocks_seen;
    if (b->size == 0) broken(fmt::format("block {:#x} is empty", b->ptr));
    if (b->stream != head->stream || b->pool != head->pool || b->segment != head->segment) {
      broken(fmt::format("block {:#x} differs in stream, pool or segment from its segment's first block", b->ptr));
    }
    if (b->allocated && (b->event_count != 0 || !b->mapped)) {
      broken(fmt::format("allocated block {:#x} has pending events or is unmapped", b->ptr));
    }
    if (b->allocated) {
      const auto it = live_.find(b->ptr);
      if (it == live_.end() || it->second != b) broken(fmt::format("allocated block {:#x} is not live", b->ptr));
    }
    if (b->cached() && b->mapped && b->pool->blocks().count(const_cast<block*>(b)) == 0) {
      broken(fmt::format("free block {:#x} is not in its pool", b->ptr));
    }
    if (!b->mapped && b->pool->unmapped().count(const_cast<block*>(b)) == 0) {
      broken(fmt::format("unmapped range {:#x} is not in its pool's unmapped set", b->ptr));
    }
    check_neighbourhood(b);
    total += b->size;
    if (b->mapped) mapped += b->size;
  }
  if (head->segment == nullptr) {
    const auto it = legacy_segments_.find(head->ptr);
    if (it == legacy_segments_.end() || it->second != total) {
      broken(fmt::format("the blocks from {:#x} cover {} bytes, which is no legacy segment", head->ptr, total));
    }
  } else {
    head->segment->validate();
    if (head->ptr != head->segment->base() || total != head->segment->size() ||
        mapped != head->segment->mapped_bytes()) {
      broken(fmt::format("the blocks of the expandable segment at {:#x} cover {} bytes ({} mapped), not its {} "
                         "({} mapped)", head->segment->base(), total, mapped, head->segment->size(),
                         head->segment->mapped_bytes()));
    }
  }
}

void torch_caching_resource::validate() const {
  // Every block is reachable from a segment's first block; segments tile exactly; counters match.
  std::vector<const block*> heads;
  std::size_t known = 0;
  std::size_t allocated = 0;
  std::size_t cached_bytes = 0;
  const auto note = [&](const block* b) {
    ++known;
    const block* h = b;
    while (h->prev != nullptr) h = h->prev;
    heads.push_back(h);
  };
  for (const auto& [ptr, b] : live_) {
    note(b);
    allocated += b->size;
  }
  for (const block_pool* pool : {&small_, &large_}) {
    std::size_t bytes = 0;
    for (const block* b : pool->blocks()) {
      if (!b->cached() || !b->mapped || b->pool != pool) broken(fmt::format("pooled block {:#x} is not free", b->ptr));
      note(b);
      bytes += b->size;
    }
    if (bytes != pool->free_bytes()) broken("a pool's free byte count is off");
    cached_bytes += bytes;
    for (const block* b : pool->unmapped()) note(b);
  }
  std::vector<const block*> waiting;
  for (const auto& [stream, queue] : events_) {
    for (const auto& e : queue) waiting.push_back(e.owner);
  }
  std::sort(waiting.begin(), waiting.end());
  waiting.erase(std::unique(waiting.begin(), waiting.end()), waiting.end());
  for (const block* b : waiting) note(b);
  if (known != arena_.live()) {
    broken(fmt::format("{} blocks exist but {} are allocated, cached, unmapped or waiting", arena_.live(), known));
  }
  std::sort(heads.begin(), heads.end());
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  std::size_t seen = 0;
  std::size_t legacy_bytes = 0;
  std::size_t mapped_bytes = 0;
  for (const block* h : heads) {
    validate_segment(h, seen);
    if (h->segment == nullptr) legacy_bytes += legacy_segments_.at(h->ptr);
  }
  for (const auto& es : expandable_) mapped_bytes += es->mapped_bytes();
  if (seen != known) broken(fmt::format("{} blocks lie in segments but {} are known", seen, known));
  if (heads.size() != legacy_segments_.size() + expandable_.size() || stats_.segments != heads.size()) {
    broken(fmt::format("{} segments have blocks, {} legacy and {} expandable are held, {} counted", heads.size(),
                       legacy_segments_.size(), expandable_.size(), stats_.segments));
  }
  if (reserved_ != legacy_bytes + mapped_bytes) {
    broken(fmt::format("reserved {} != legacy segments {} + mapped pages {}", reserved_, legacy_bytes, mapped_bytes));
  }
  if (allocated_ != allocated) broken(fmt::format("allocated {} != live blocks {}", allocated_, allocated));
  if (allocated_ + cached_bytes > reserved_) broken("allocated and cached bytes exceed reserved bytes");
}

std::unique_ptr<memory_resource> make_torch_native_resource(device& dev, const policy_options& options) {
  return std::make_unique<torch_caching_resource>(dev, torch_allocator_config::parse(options, false));
}

}  // namespace vram
