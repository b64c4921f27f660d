#pragma once
// The base of the decorators: a memory_resource that passes every call to an upstream resource, so that a
// decorator overrides only what it adds. Decorators stack (a limit over statistics over vram's pool), each
// holding a reference to the next, which must outlive it, or owning it. Names, figures and invariants are the
// upstream's; a decorator is not a policy of its own.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "vram/resource/memory_resource.hpp"

namespace vram {

class resource_adaptor : public memory_resource {
 public:
  explicit resource_adaptor(memory_resource& upstream) noexcept
      : memory_resource(upstream.upstream_device()), upstream_(upstream) {}
  /// @brief Owns its upstream (a stack made in one expression: the registry's, a test's).
  explicit resource_adaptor(std::unique_ptr<memory_resource> upstream) noexcept
      : memory_resource(upstream->upstream_device()), owned_(std::move(upstream)), upstream_(*owned_) {}

  memory_resource& upstream() const noexcept { return upstream_; }

  void record_stream(device_ptr p, stream_id stream) override { upstream_.record_stream(p, stream); }
  std::string_view name() const noexcept override { return upstream_.name(); }
  free_space free_memory() const override { return upstream_.free_memory(); }
  void release_cached() override { upstream_.release_cached(); }
  void validate() const override { upstream_.validate(); }
  std::vector<std::pair<std::string, std::uint64_t>> counters() const override { return upstream_.counters(); }
  std::size_t reserved_bytes() const noexcept override { return upstream_.reserved_bytes(); }
  std::size_t allocated_bytes() const noexcept override { return upstream_.allocated_bytes(); }

 protected:
  /// The upstream's answer, 0 when it cannot serve the request (after its own retries).
  device_ptr do_allocate(std::size_t bytes, stream_id stream) override { return upstream_.try_allocate(bytes, stream); }
  /// The upstream checks the free: a bad one throws usage_error there, before a decorator counts it.
  void do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) override {
    upstream_.deallocate(p, bytes, stream);
  }
  std::string out_of_memory_message(std::size_t bytes, stream_id stream) const override {
    return upstream_.explain_out_of_memory(bytes, stream);
  }

 private:
  std::unique_ptr<memory_resource> owned_;  // null when the upstream belongs to the caller
  memory_resource& upstream_;
};

}  // namespace vram
