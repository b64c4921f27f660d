// The `cuda-direct` policy: one driver call per allocate and per deallocate; see the header for its
// accounting. The maps draw their nodes from a pool, so a steady replay allocates no host memory per call.
#include "vram/emulation/cuda_direct_resource.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/device/device.hpp"

namespace vram {

cuda_direct_resource::cuda_direct_resource(device& dev) : memory_resource(dev), live_(&pool_), pages_(&pool_) {}

cuda_direct_resource::~cuda_direct_resource() {
  for (const auto& [p, bytes] : live_) {
    try {
      device_->legacy_free(p);
    } catch (const error&) {
      // The device no longer knows the block; nothing more can be done while being destroyed.
    }
  }
}

device_ptr cuda_direct_resource::do_allocate(std::size_t bytes, stream_id /*stream*/) {
  const device_ptr p = device_->legacy_malloc(bytes);
  if (p == 0) return 0;
  if (p % alignment != 0 || !live_.emplace(p, bytes).second) {
    throw invariant_error(fmt::format("cuda-direct: the device returned 0x{:x} for {} bytes, {}", p, bytes,
                                      p % alignment != 0 ? "not 512-byte aligned" : "a block already live"));
  }
  const std::size_t rounded = round_up(bytes, alignment);
  if (rounded <= small_max) {
    auto [it, fresh] = pages_.try_emplace(p & ~device_ptr{page_bytes - 1}, page_use{});
    if (fresh) reserved_ += page_bytes;
    it->second.live += 1;
    it->second.bytes += rounded;
  } else {
    reserved_ += round_up(rounded, page_bytes);
  }
  allocated_ += rounded;
  return p;
}

void cuda_direct_resource::do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) {
  const auto it = live_.find(p);
  if (it == live_.end()) {
    throw usage_error(fmt::format("cuda-direct: deallocate(0x{:x}, {} bytes, stream {}): not a live block of this "
                                  "allocator (never allocated here, or already freed)", p, bytes, stream));
  }
  if (it->second != bytes) {
    throw usage_error(fmt::format("cuda-direct: deallocate(0x{:x}, {} bytes, stream {}): the block was allocated "
                                  "with {} bytes", p, bytes, stream, it->second));
  }
  device_->legacy_free(p);  // may throw device_error; nothing here has changed yet
  const std::size_t rounded = round_up(bytes, alignment);
  live_.erase(it);
  allocated_ -= rounded;
  if (rounded > small_max) {
    reserved_ -= round_up(rounded, page_bytes);
    return;
  }
  const auto page = pages_.find(p & ~device_ptr{page_bytes - 1});
  page->second.bytes -= rounded;
  if (--page->second.live == 0) {  // the driver gives the page back
    pages_.erase(page);
    reserved_ -= page_bytes;
  }
}

free_space cuda_direct_resource::free_memory() const {
  free_space fs{reserved_ - allocated_, 0};
  for (const auto& [page, use] : pages_) fs.largest = std::max(fs.largest, page_bytes - use.bytes);
  return fs;
}

void cuda_direct_resource::validate() const {
  auto broken = [](const std::string& what) { throw invariant_error("cuda-direct: " + what); };
  std::size_t allocated = 0, reserved = 0;
  std::unordered_map<device_ptr, page_use> per_page;
  for (const auto& [p, bytes] : live_) {
    const std::size_t rounded = round_up(bytes, alignment);
    allocated += rounded;
    if (rounded > small_max) {
      reserved += round_up(rounded, page_bytes);
      continue;
    }
    auto& use = per_page[p & ~device_ptr{page_bytes - 1}];
    use.live += 1;
    use.bytes += rounded;
  }
  if (per_page.size() != pages_.size()) broken(fmt::format("{} pages counted, {} hold live blocks", pages_.size(), per_page.size()));
  for (const auto& [page, use] : pages_) {
    const auto it = per_page.find(page);
    if (it == per_page.end() || it->second.live != use.live || it->second.bytes != use.bytes || use.bytes > page_bytes)
      broken(fmt::format("page 0x{:x} counts {} live blocks of {} bytes; they disagree with the live blocks", page,
                         use.live, use.bytes));
    reserved += page_bytes;
  }
  if (allocated != allocated_) broken(fmt::format("allocated {} != sum of live blocks {}", allocated_, allocated));
  if (reserved != reserved_) broken(fmt::format("reserved {} != pages and large blocks {}", reserved_, reserved));
  if (reserved_ < allocated_) broken(fmt::format("reserved {} < allocated {}", reserved_, allocated_));
}

std::unique_ptr<memory_resource> make_cuda_direct_resource(device& dev, const policy_options& options) {
  if (!options.empty()) {
    throw usage_error(fmt::format("cuda-direct takes no settings, but got '{}'; use plain \"cuda-direct\"",
                                  options.begin()->first));
  }
  return std::make_unique<cuda_direct_resource>(dev);
}

}  // namespace vram
