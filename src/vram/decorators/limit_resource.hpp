#pragma once
// Refuses an allocation that would take the bytes live through it past a limit, whatever the upstream could
// serve: a budget for one part of a program on a shared pool, or a smaller device for a test. Live bytes are
// the requested sizes rounded up to 512, as every resource places blocks. A refusal is an out-of-memory like
// the upstream's (try_allocate returns 0, allocate throws out_of_memory) whose message names the limit. Not
// thread-safe: put a thread_safe_resource above it for threads.

#include <cstddef>
#include <string>

#include "vram/decorators/resource_adaptor.hpp"

namespace vram {

class limit_resource final : public resource_adaptor {
 public:
  limit_resource(memory_resource& upstream, std::size_t limit_bytes) noexcept
      : resource_adaptor(upstream), limit_(limit_bytes) {}
  limit_resource(std::unique_ptr<memory_resource> upstream, std::size_t limit_bytes) noexcept
      : resource_adaptor(std::move(upstream)), limit_(limit_bytes) {}

  std::size_t limit() const noexcept { return limit_; }
  /// @brief Bytes live through this resource, each block's size rounded up to 512.
  std::size_t used() const noexcept { return used_; }

  static std::size_t charge(std::size_t bytes) noexcept { return (bytes + 511) / 512 * 512; }

 protected:
  device_ptr do_allocate(std::size_t bytes, stream_id stream) override {
    if (charge(bytes) > limit_ - used_) return 0;  // used_ <= limit_ always
    const device_ptr p = resource_adaptor::do_allocate(bytes, stream);
    if (p != 0) used_ += charge(bytes);
    return p;
  }
  void do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) override {
    resource_adaptor::do_deallocate(p, bytes, stream);  // a bad free throws here and changes nothing
    used_ -= charge(bytes);
  }
  std::string out_of_memory_message(std::size_t bytes, stream_id stream) const override;

 private:
  std::size_t limit_;
  std::size_t used_ = 0;
};

}  // namespace vram
