// cub-bins: CUB's CachingDeviceAllocator on the device seam. Rules and sources: docs/emulations/cub.md.
#include "vram/emulation/cub_bins_resource.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <string>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/device.hpp"

namespace vram {

namespace {

/// growth^exponent, or 0 when it does not fit in a size_t.
std::size_t checked_pow(std::size_t growth, unsigned exponent) noexcept {
  std::size_t v = 1;
  for (unsigned i = 0; i < exponent; ++i) {
    if (v > std::numeric_limits<std::size_t>::max() / growth) return 0;
    v *= growth;
  }
  return v;
}

unsigned parse_unsigned(std::string_view key, std::string_view text) {
  unsigned v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    throw usage_error(fmt::format("cub-bins: {}='{}' is not a whole number", key, text));
  }
  return v;
}

}  // namespace

cub_bins_resource::cub_bins_resource(device& dev, const cub_bins_options& options)
    : memory_resource(dev), options_(options) {
  if (options_.bin_growth < 2) throw usage_error(fmt::format("cub-bins: bin_growth {} must be at least 2", options_.bin_growth));
  if (options_.min_bin > options_.max_bin) {
    throw usage_error(fmt::format("cub-bins: min_bin {} is above max_bin {}", options_.min_bin, options_.max_bin));
  }
  min_bin_bytes_ = checked_pow(options_.bin_growth, options_.min_bin);
  max_bin_bytes_ = checked_pow(options_.bin_growth, options_.max_bin);
  if (max_bin_bytes_ == 0) {
    throw usage_error(fmt::format("cub-bins: the largest bin {}^{} does not fit in 64 bits", options_.bin_growth,
                                  options_.max_bin));
  }
}

cub_bins_resource::~cub_bins_resource() {
  // CUB's destructor frees the cached blocks; the live ones are given back too, so the device ends clean.
  try {
    free_all_cached();
    for (const auto& [p, b] : live_) {
      device_->legacy_free(p);
      device_->event_destroy(b.ready);
    }
  } catch (...) {
    // A destructor must not throw; the device is being torn down or was misused elsewhere.
  }
}

std::size_t cub_bins_resource::bin_bytes(std::size_t bytes) const noexcept {
  if (bytes <= min_bin_bytes_) return min_bin_bytes_;
  if (bytes > max_bin_bytes_) return 0;
  // The smallest power of bin_growth that holds the request; it cannot overflow below max_bin_bytes_.
  std::size_t rounded = min_bin_bytes_;
  while (rounded < bytes) rounded *= options_.bin_growth;
  return rounded;
}

std::size_t cub_bins_resource::block_size(std::size_t bytes) const noexcept {
  const std::size_t bin = bin_bytes(bytes);
  return bin != 0 ? bin : bytes;
}

device_ptr cub_bins_resource::device_malloc(std::size_t bytes) {
  if (const device_ptr p = device_->legacy_malloc(bytes); p != 0) return p;
  // CUB: on cudaErrorMemoryAllocation, free every cached block of the device and try once more.
  free_all_cached();
  return device_->legacy_malloc(bytes);
}

void cub_bins_resource::free_all_cached() {
  while (!cached_.empty()) {
    auto it = cached_.begin();
    device_->legacy_free(it->second.ptr);
    device_->event_destroy(it->second.ready);
    reserved_ -= it->first;
    cached_bytes_ -= it->first;
    cached_.erase(it);
  }
}

void cub_bins_resource::release_cached() { free_all_cached(); }

device_ptr cub_bins_resource::do_allocate(std::size_t bytes, stream_id stream) {
  const std::size_t bin = bin_bytes(bytes);
  const std::size_t size = bin != 0 ? bin : bytes;
  device_ptr p = 0;
  event_id ready = 0;
  if (bin != 0) {
    // Oldest first within the bin: a block of this stream at once, another stream's once its event is done.
    for (auto it = cached_.lower_bound(bin); it != cached_.end() && it->first == bin; ++it) {
      if (it->second.stream == stream || device_->event_query(it->second.ready)) {
        p = it->second.ptr;
        ready = it->second.ready;
        cached_bytes_ -= bin;
        cached_.erase(it);
        break;
      }
    }
  }
  if (p == 0) {
    p = device_malloc(size);
    if (p == 0) return 0;
    ready = device_->event_create();
    reserved_ += size;
  }
  live_.emplace(p, live_block{size, bytes, stream, ready, bin != 0});
  allocated_ += size;
  return p;
}

void cub_bins_resource::do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) {
  (void)stream;  // CUB's DeviceFree takes no stream: the block belongs to the stream it was allocated on
  auto it = live_.find(p);
  if (it == live_.end()) {
    throw usage_error(fmt::format("cub-bins: deallocate({:#x}, {} bytes): not a live block of this allocator "
                                  "(never allocated here, or already freed)",
                                  p, bytes));
  }
  if (it->second.requested != bytes) {
    throw usage_error(fmt::format("cub-bins: deallocate({:#x}, {} bytes): the block was allocated with {} bytes", p,
                                  bytes, it->second.requested));
  }
  const live_block b = it->second;
  live_.erase(it);
  allocated_ -= b.bytes;
  if (b.binned && cached_bytes_ + b.bytes <= options_.max_cached_bytes) {
    cached_.emplace(b.bytes, cached_block{p, b.stream, b.ready});  // after blocks of equal size
    cached_bytes_ += b.bytes;
    device_->event_record(b.ready, b.stream);
  } else {
    device_->legacy_free(p);
    device_->event_destroy(b.ready);
    reserved_ -= b.bytes;
  }
}

free_space cub_bins_resource::free_memory() const {
  return free_space{cached_bytes_, cached_.empty() ? 0 : cached_.rbegin()->first};
}

std::string cub_bins_resource::out_of_memory_message(std::size_t bytes, stream_id stream) const {
  return memory_resource::out_of_memory_message(bytes, stream) +
         fmt::format(" (cub-bins asked the device for a block of {} bytes, after giving back its whole cache)",
                     block_size(bytes));
}

void cub_bins_resource::validate() const {
  struct range {
    device_ptr ptr;
    std::size_t size;
  };
  std::vector<range> all;
  all.reserve(live_.size() + cached_.size());
  std::size_t live_sum = 0;
  for (const auto& [p, b] : live_) {
    const std::size_t expect = b.binned ? bin_bytes(b.requested) : b.requested;
    if (b.bytes != expect || b.binned != (bin_bytes(b.requested) != 0)) {
      throw invariant_error(fmt::format("cub-bins: live block {:#x} has {} bytes for a request of {}", p, b.bytes, b.requested));
    }
    live_sum += b.bytes;
    all.push_back(range{p, b.bytes});
  }
  std::size_t cached_sum = 0;
  for (const auto& [size, c] : cached_) {
    if (bin_bytes(size) != size) throw invariant_error(fmt::format("cub-bins: cached block {:#x} of {} bytes is not a bin size", c.ptr, size));
    cached_sum += size;
    all.push_back(range{c.ptr, size});
  }
  if (live_sum != allocated_) {
    throw invariant_error(fmt::format("cub-bins: allocated bytes {} != sum of live blocks {}", allocated_, live_sum));
  }
  if (cached_sum != cached_bytes_) {
    throw invariant_error(fmt::format("cub-bins: cached bytes {} != sum of cached blocks {}", cached_bytes_, cached_sum));
  }
  if (reserved_ != allocated_ + cached_bytes_) {
    throw invariant_error(fmt::format("cub-bins: reserved {} != live {} + cached {}", reserved_, allocated_, cached_bytes_));
  }
  if (cached_bytes_ > options_.max_cached_bytes) {
    throw invariant_error(fmt::format("cub-bins: {} cached bytes exceed max_cached_bytes {}", cached_bytes_, options_.max_cached_bytes));
  }
  std::sort(all.begin(), all.end(), [](const range& a, const range& b) { return a.ptr < b.ptr; });
  for (std::size_t i = 1; i < all.size(); ++i) {
    if (all[i].ptr < all[i - 1].ptr + all[i - 1].size) {
      throw invariant_error(fmt::format("cub-bins: block at {:#x} overlaps the block at {:#x}", all[i].ptr, all[i - 1].ptr));
    }
  }
}

std::unique_ptr<memory_resource> make_cub_bins_resource(device& dev, const policy_options& options) {
  cub_bins_options o;
  for (const auto& [key, value] : options) {
    if (key == "bin_growth") {
      o.bin_growth = parse_unsigned(key, value);
    } else if (key == "min_bin") {
      o.min_bin = parse_unsigned(key, value);
    } else if (key == "max_bin") {
      o.max_bin = parse_unsigned(key, value);
    } else if (key == "max_cached_bytes") {
      o.max_cached_bytes = parse_size(value);
    } else {
      throw usage_error(fmt::format(
          "cub-bins: unknown setting '{}' (known: bin_growth, min_bin, max_bin, max_cached_bytes)", key));
    }
  }
  return std::make_unique<cub_bins_resource>(dev, o);
}

}  // namespace vram
