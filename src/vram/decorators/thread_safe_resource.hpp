#pragma once
// One mutex around every call to the upstream resource, for resources that are not thread-safe themselves
// (the emulations, and the other decorators). vram's pool needs none: its hot path takes no lock.

#include <mutex>

#include "vram/decorators/resource_adaptor.hpp"

namespace vram {

class thread_safe_resource final : public resource_adaptor {
 public:
  using resource_adaptor::resource_adaptor;

  void record_stream(device_ptr p, stream_id stream) override {
    std::lock_guard lock(mutex_);
    resource_adaptor::record_stream(p, stream);
  }
  free_space free_memory() const override {
    std::lock_guard lock(mutex_);
    return resource_adaptor::free_memory();
  }
  void release_cached() override {
    std::lock_guard lock(mutex_);
    resource_adaptor::release_cached();
  }
  void validate() const override {
    std::lock_guard lock(mutex_);
    resource_adaptor::validate();
  }
  std::size_t reserved_bytes() const noexcept override {
    std::lock_guard lock(mutex_);
    return resource_adaptor::reserved_bytes();
  }
  std::size_t allocated_bytes() const noexcept override {
    std::lock_guard lock(mutex_);
    return resource_adaptor::allocated_bytes();
  }

 protected:
  device_ptr do_allocate(std::size_t bytes, stream_id stream) override {
    std::lock_guard lock(mutex_);
    return resource_adaptor::do_allocate(bytes, stream);
  }
  void do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) override {
    std::lock_guard lock(mutex_);
    resource_adaptor::do_deallocate(p, bytes, stream);
  }
  std::string out_of_memory_message(std::size_t bytes, stream_id stream) const override {
    std::lock_guard lock(mutex_);
    return resource_adaptor::out_of_memory_message(bytes, stream);
  }

 private:
  mutable std::mutex mutex_;
};

}  // namespace vram
