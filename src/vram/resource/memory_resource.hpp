#pragma once
// The allocator interface, in the style of RMM's device_memory_resource: allocate(bytes, stream) and
// deallocate(ptr, bytes, stream). vram's pool and the emulations of other allocators implement it, and so do
// the decorators of src/vram/decorators (statistics, a limit, a mutex, a trace), which wrap any of them.
// Every resource draws on one device through the device seam and never calls a driver itself.
//
// Contracts shared by all resources (checked by tests/conformance_test.cpp):
//  - allocate(0) returns 0 and deallocate(0, ...) does nothing, as cudaMalloc / cudaFree do;
//  - a returned block is aligned to at least 512 bytes and never overlaps another live block;
//  - try_allocate returns 0 when the device cannot serve the request (after the resource's own retry rules);
//    allocate throws out_of_memory with a message a person can act on;
//  - deallocate of a pointer not handed out, a double free, or a wrong size throws usage_error and changes
//    nothing;
//  - reserved_bytes() is what the resource holds from the device; allocated_bytes() the rounded sizes of its
//    live blocks; reserved_bytes() >= allocated_bytes().

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vram/core/types.hpp"

namespace vram {

class device;

/// @brief Free memory held inside an allocator: its total and its largest contiguous block.
struct free_space {
  std::size_t total = 0;
  std::size_t largest = 0;
};

/// @brief Base class of every allocator.
class memory_resource {
 public:
  explicit memory_resource(device& dev) noexcept : device_(&dev) {}
  virtual ~memory_resource() = default;
  memory_resource(const memory_resource&) = delete;
  memory_resource& operator=(const memory_resource&) = delete;

  /// @brief The largest request any resource takes (64 PiB): larger ones are refused here, before a policy
  /// rounds them, since no device is that large and rounding a size near 2^64 up to a granule would wrap
  /// to a small number. Every policy's do_allocate / do_deallocate may rely on bytes <= this.
  static constexpr std::size_t max_request_bytes = std::size_t{1} << 56;

  /// @brief A block of at least @p bytes usable in stream order on @p stream.
  /// @throws out_of_memory when the device cannot serve it (always above max_request_bytes).
  device_ptr allocate(std::size_t bytes, stream_id stream = 0) {
    if (bytes == 0) return 0;
    if (bytes > max_request_bytes) [[unlikely]] throw_too_large(bytes, stream);
    const device_ptr p = do_allocate(bytes, stream);
    if (p == 0) [[unlikely]] throw_out_of_memory(bytes, stream);
    return p;
  }
  /// @brief As allocate, but returns 0 instead of throwing when memory runs out.
  device_ptr try_allocate(std::size_t bytes, stream_id stream = 0) {
    return bytes == 0 || bytes > max_request_bytes ? 0 : do_allocate(bytes, stream);
  }
  /// @brief Frees a block; @p bytes and @p stream as given to allocate.
  /// @throws usage_error for a pointer not handed out, a double free or a wrong size.
  void deallocate(device_ptr p, std::size_t bytes, stream_id stream = 0) {
    if (p == 0) return;
    if (bytes > max_request_bytes) [[unlikely]] throw_bad_free_size(p, bytes);
    do_deallocate(p, bytes, stream);
  }
  /// @brief Marks @p p as used on @p stream too: its memory is reused only after that stream's work
  /// queued at the free completes (PyTorch's record_stream). Resources without stream tracking ignore it.
  virtual void record_stream(device_ptr p, stream_id stream) { (void)p, (void)stream; }

  /// @brief The policy name as used on the command line ("torch-native", "rmm-pool", ...).
  virtual std::string_view name() const noexcept = 0;
  /// @brief Free memory held inside the resource (for external fragmentation).
  virtual free_space free_memory() const = 0;
  /// @brief Gives cached memory back to the device (torch's empty_cache, vram's trim).
  virtual void release_cached() {}
  /// @brief Checks the resource's invariants; throws invariant_error naming the one broken.
  virtual void validate() const {}
  /// @brief What the resource counts of its own work, by name (vram's pool: handles made and mapped,
  /// growths, aliases, deferred unmaps, ...); empty where it counts nothing. `vram replay --json` shows them.
  virtual std::vector<std::pair<std::string, std::uint64_t>> counters() const { return {}; }
  /// @brief What allocate() says when it cannot serve @p bytes on @p stream (decorators pass it on).
  std::string explain_out_of_memory(std::size_t bytes, stream_id stream) const {
    return out_of_memory_message(bytes, stream);
  }

  /// @brief Bytes held from the device.
  virtual std::size_t reserved_bytes() const noexcept { return reserved_; }
  /// @brief Rounded sizes of the live blocks.
  virtual std::size_t allocated_bytes() const noexcept { return allocated_; }
  device& upstream_device() const noexcept { return *device_; }

 protected:
  virtual device_ptr do_allocate(std::size_t bytes, stream_id stream) = 0;
  virtual void do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) = 0;
  /// @brief The message of out_of_memory: what was asked, what is held and free, and what to try.
  virtual std::string out_of_memory_message(std::size_t bytes, stream_id stream) const;
  [[noreturn]] void throw_out_of_memory(std::size_t bytes, stream_id stream) const;
  [[noreturn]] void throw_too_large(std::size_t bytes, stream_id stream) const;
  [[noreturn]] void throw_bad_free_size(device_ptr p, std::size_t bytes) const;

  device* device_;
  std::size_t reserved_ = 0;   // maintained by the derived resource
  std::size_t allocated_ = 0;  // maintained by the derived resource
};

}  // namespace vram
