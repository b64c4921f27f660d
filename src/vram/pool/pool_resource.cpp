// vram's pool: the arena behind a lock, bad-input checks, statistics and snapshot.
#include "vram/pool/pool_resource.hpp"

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/device.hpp"

namespace vram {

namespace {

detail::arena_options arena_settings(const pool_options& o) {
  detail::arena_options a;
  a.max_cached_ratio = o.max_cached_ratio;
  a.zones = 2;
  a.max_handle_bytes = o.max_handle_bytes;
  a.limit = o.limit;
  return a;
}

}  // namespace

pool_resource::pool_resource(device& dev, pool_options options)
    : memory_resource(dev),
      options_(options),
      arena_(dev, arena_settings(options)) {
  live_.reserve(1024);
}

pool_resource::~pool_resource() = default;

device_ptr pool_resource::do_allocate(std::size_t bytes, stream_id) {
  std::lock_guard lock(mutex_);
  device_ptr p = 0;
  std::size_t rounded = 0;
  rounded = round_up(bytes, 512);
  p = arena_.allocate(rounded, 512, bytes <= small_max ? 0 : 1);
  if (p != 0) live_.emplace(p, rounded);
  if (p == 0) {
    ++stats_.failed_allocations;
    return 0;
  }
  ++stats_.allocations;
  stats_.requested_bytes += bytes;
  allocated_ += rounded;
  reserved_ = arena_.reserved();
  update_peaks();
#if VRAM_DEBUG_VALIDATE
  if (stats_.allocations % 4096 == 0) arena_.validate();
#endif
  return p;
}

void pool_resource::do_deallocate(device_ptr p, std::size_t bytes, stream_id) {
  std::lock_guard lock(mutex_);
  std::size_t rounded = 0;
  auto it = live_.find(p);
  if (it == live_.end())
    throw usage_error(fmt::format("vram: free of {:#x} ({} bytes): not a live block of this pool (never allocated here, "
                                  "or already freed); the pool is unchanged", p, bytes));
  if (round_up(bytes, 512) != it->second)
    throw usage_error(fmt::format("vram: free of {:#x} with size {}, but the block was allocated with size {} "
                                  "(rounded); the pool is unchanged", p, bytes, it->second));
  rounded = it->second;
  live_.erase(it);
  arena_.deallocate(p, rounded);
  ++stats_.frees;
  stats_.requested_bytes -= std::min(stats_.requested_bytes, bytes);
  allocated_ -= rounded;
  reserved_ = arena_.reserved();
}

void pool_resource::update_peaks() {
  stats_.peak_requested_bytes = std::max(stats_.peak_requested_bytes, stats_.requested_bytes);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, allocated_);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, reserved_);
}

free_space pool_resource::free_memory() const {
  std::lock_guard lock(mutex_);
  return arena_.free_memory();
}

std::size_t pool_resource::trim() {
  std::lock_guard lock(mutex_);
  const std::size_t released = arena_.trim();
  reserved_ = arena_.reserved();
  return released;
}

void pool_resource::set_limit(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  arena_.set_limit(bytes);  // TODO shared limit
}

std::size_t pool_resource::limit() const {
  std::lock_guard lock(mutex_);
  return arena_.limit();
}

pool_stats pool_resource::stats() const {
  std::lock_guard lock(mutex_);
  pool_stats s = stats_;
  s.allocated_bytes = allocated_;
  s.reserved_bytes = reserved_;
  s.mapped_bytes = arena_.mapped();
  s.cached_bytes = reserved_ - allocated_;
  s.arena = arena_.counters();
  return s;
}

void pool_resource::validate() const {
  std::lock_guard lock(mutex_);
  arena_.validate();
  std::size_t live = 0;
  for (const auto& [p, size] : live_) live += size;
  if (arena_.in_use() != live)
    throw invariant_error(fmt::format("vram pool: arena in use {} != live blocks {}", arena_.in_use(), live));
  if (allocated_ != live) throw invariant_error(fmt::format("vram pool: allocated {} != live blocks {}", allocated_, live));
  if (reserved_ != arena_.reserved())
    throw invariant_error(fmt::format("vram pool: reserved {} != arena reserved {}", reserved_, arena_.reserved()));
  if (reserved_ < allocated_) throw invariant_error("vram pool: reserved below allocated");
}

std::string pool_resource::out_of_memory_message(std::size_t bytes, stream_id stream) const {
  const auto s = stats();
  const auto f = free_memory();
  const auto info = device_->mem_info();
  const double frag = f.total == 0 ? 0.0 : 1.0 - static_cast<double>(f.largest) / static_cast<double>(f.total);
  return fmt::format(
      "vram: out of memory allocating {} on stream {}: {} live in {} allocated; the pool reserves {} ({} cached, "
      "largest free range {}, fragmentation {:.1f}%){}; the device has {} free of {}. Free live blocks, lower the "
      "request, raise the limit, or use a larger device.",
      format_bytes(bytes), stream, format_bytes(s.requested_bytes), format_bytes(s.allocated_bytes),
      format_bytes(s.reserved_bytes), format_bytes(s.cached_bytes), format_bytes(f.largest), 100.0 * frag,
      s.arena.handles_created == 0 && arena_.limit() == 0 ? "" : arena_.limit() ? fmt::format(", limit {}", format_bytes(arena_.limit())) : "",
      format_bytes(info.free), format_bytes(info.total));
}

nlohmann::json pool_resource::snapshot() const {
  std::lock_guard lock(mutex_);
  nlohmann::json handles = nlohmann::json::array();
  for (const auto& h : arena_.handles()) handles.push_back({{"address", h.va}, {"bytes", h.bytes}, {"busy_granules", h.busy_granules}});
  nlohmann::json free_ranges = nlohmann::json::array();
  for (const auto& [addr, size] : arena_.free_ranges()) free_ranges.push_back({addr, size});
  nlohmann::json blocks = nlohmann::json::array();
  for (const auto& [p, size] : live_) blocks.push_back({p, size});
  return {{"policy", "vram"},
          {"device", device_->name()},
          {"address_range", {{"base", arena_.base()}, {"bytes", arena_.span()}}},
          {"granularity", arena_.granularity()},
          {"reserved_bytes", reserved_},
          {"allocated_bytes", allocated_},
          {"mapped_bytes", arena_.mapped()},
          {"handles", handles},
          {"free_ranges", free_ranges},
          {"blocks", blocks}};
}

std::unique_ptr<memory_resource> make_vram_pool_resource(device& dev, const policy_options& options) {
  return std::make_unique<pool_resource>(dev, pool_options::from_environment().with(options));
}

}  // namespace vram
