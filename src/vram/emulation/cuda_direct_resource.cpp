// The `cuda-direct` policy: one driver call per allocate and per deallocate; see the header for its
// accounting. The maps draw their nodes from a pool, so a steady replay allocates no host memory per call.
#include "vram/emulation/cuda_direct_resource.hpp"

#include <bit>

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

void cuda_direct_resource::add_free_slots(std::size_t block, std::int64_t n) noexcept {
  const std::size_t c = block / alignment - 1;
  free_slots_[c] = static_cast<std::uint64_t>(static_cast<std::int64_t>(free_slots_[c]) + n);
  const std::uint64_t bit = std::uint64_t{1} << (c % 64);
  if (free_slots_[c] != 0) {
    with_room_[c / 64] |= bit;
  } else {
    with_room_[c / 64] &= ~bit;
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
    const device_ptr page = p & ~device_ptr{page_bytes - 1};
    auto [it, fresh] = pages_.try_emplace(page, page_use{rounded, 0});
    if (it->second.block != rounded) {
      live_.erase(p);
      device_->legacy_free(p);
      throw invariant_error(fmt::format(
          "cuda-direct: the device put a block of {} bytes at 0x{:x}, in the 2 MiB page of {}-byte blocks; the "
          "accounting assumes one block size per page (docs/device.md)", rounded, p, it->second.block));
    }
    if (fresh) {
      reserved_ += page_bytes;
      add_free_slots(rounded, static_cast<std::int64_t>(page_bytes / rounded));
    }
    it->second.live += 1;
    add_free_slots(rounded, -1);
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
  add_free_slots(rounded, +1);
  if (--page->second.live == 0) {  // the driver gives the page back
    add_free_slots(rounded, -static_cast<std::int64_t>(page_bytes / rounded));
    pages_.erase(page);
    reserved_ -= page_bytes;
  }
}

free_space cuda_direct_resource::free_memory() const {
  free_space fs{reserved_ - allocated_, 0};
  for (std::size_t w = with_room_.size(); w-- > 0;) {
    if (with_room_[w] != 0) {
      const std::size_t c = w * 64 + 63 - static_cast<std::size_t>(std::countl_zero(with_room_[w]));
      fs.largest = (c + 1) * alignment;
      break;
    }
  }
  return fs;
}

void cuda_direct_resource::validate() const {
  auto broken = [](const std::string& what) { throw invariant_error("cuda-direct: " + what); };
  std::size_t allocated = 0, reserved = 0;
  std::unordered_map<device_ptr, std::uint32_t> per_page;
  std::array<std::uint64_t, classes> slots{};
  for (const auto& [p, bytes] : live_) {
    const std::size_t rounded = round_up(bytes, alignment);
    allocated += rounded;
    if (rounded > small_max) {
      reserved += round_up(rounded, page_bytes);
      continue;
    }
    const device_ptr page = p & ~device_ptr{page_bytes - 1};
    const auto it = pages_.find(page);
    if (it == pages_.end() || it->second.block != rounded) {
      broken(fmt::format("block 0x{:x} of {} bytes has no page of its size at 0x{:x}", p, rounded, page));
    }
    per_page[page] += 1;
  }
  for (const auto& [page, use] : pages_) {
    if (use.live == 0 || use.live != per_page[page]) {
      broken(fmt::format("page 0x{:x} counts {} live blocks, found {}", page, use.live, per_page[page]));
    }
    reserved += page_bytes;
    slots[use.block / alignment - 1] += page_bytes / use.block - use.live;
  }
  if (allocated != allocated_) broken(fmt::format("allocated {} != sum of live blocks {}", allocated_, allocated));
  if (reserved != reserved_) broken(fmt::format("reserved {} != pages and large blocks {}", reserved_, reserved));
  if (reserved_ < allocated_) broken(fmt::format("reserved {} < allocated {}", reserved_, allocated_));
  for (std::size_t c = 0; c < classes; ++c) {
    const bool bit = (with_room_[c / 64] >> (c % 64)) & 1u;
    if (slots[c] != free_slots_[c] || bit != (slots[c] != 0)) {
      broken(fmt::format("free slots of {} bytes: counted {}, found {}", (c + 1) * alignment, free_slots_[c], slots[c]));
    }
  }
}

std::unique_ptr<memory_resource> make_cuda_direct_resource(device& dev, const policy_options& options) {
  if (!options.empty()) {
    throw usage_error(fmt::format("cuda-direct takes no settings, but got '{}'; use plain \"cuda-direct\"",
                                  options.begin()->first));
  }
  return std::make_unique<cuda_direct_resource>(dev);
}

}  // namespace vram
