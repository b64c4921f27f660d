// The CUDA device. Two halves:
//  - cuda_availability: what happens where no GPU can be used (the driver is missing, or finds no device):
//    cuda_available() says why, "auto" falls back to the simulated device with a note saying so, "cuda"
//    is a usage error naming the reason. Skipped where a GPU is in use.
//  - CudaGpu*: the seam on a real GPU (select with --gtest_filter='CudaGpu*'). Skipped, with the reason
//    cuda_available() gives, where there is none.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/device/cuda_device.hpp"
#include "vram/device/cuda_driver.hpp"
#include "vram/device/device_spec.hpp"
#include "vram/device/probe.hpp"

namespace vram {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---- where no GPU can be used ---------------------------------------------------------------------------

class cuda_availability : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_available(&why_)) GTEST_SKIP() << "a CUDA device is in use here";
  }
  std::string why_;
};

TEST_F(cuda_availability, says_why_not) {
  // One of the reasons cuda_driver.cpp gives, in the order it checks them.
  EXPECT_THAT(why_, AnyOf(StartsWith("this build of vram has no CUDA device (cuda.h was not found"),
                          StartsWith("libcuda.so.1 not found"), StartsWith("libcuda.so.1 could not be loaded: "),
                          StartsWith("libcuda.so.1 has no cuGetProcAddress_v2"),
                          StartsWith("the driver lacks "), StartsWith("cuInit failed: CUDA_ERROR_"),
                          StartsWith("cuDeviceGetCount failed: "), StartsWith("the driver loaded but counts no")));
  if (!cuda_built()) EXPECT_THAT(why_, HasSubstr("cuda.h"));
  // The answer is kept: asking again gives the same reason.
  std::string again;
  EXPECT_FALSE(cuda_available(&again));
  EXPECT_EQ(again, why_);
  EXPECT_FALSE(cuda_available());
}

TEST_F(cuda_availability, auto_falls_back_to_the_simulated_device_with_a_note) {
  const device_choice c = open_device(parse_device_spec("auto"));
  ASSERT_NE(c.dev, nullptr);
  EXPECT_TRUE(c.simulated);
  EXPECT_TRUE(c.dev->simulated());
  EXPECT_EQ(c.note, "no GPU in use (" + why_ + "): running on the simulated device (" + c.dev->name() + ")");
}

TEST_F(cuda_availability, sim_is_chosen_without_a_note) {
  const device_choice c = open_device(parse_device_spec("sim"));
  EXPECT_TRUE(c.dev->simulated());
  EXPECT_EQ(c.note, "");
}

TEST_F(cuda_availability, cuda_is_a_usage_error_naming_the_reason) {
  for (const char* text : {"cuda", "cuda:1"}) {
    try {
      open_device(parse_device_spec(text));
      FAIL() << text << " opened without a GPU";
    } catch (const usage_error& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string("device '") + text + "': CUDA is not available (" + why_ + ")"));
      EXPECT_THAT(e.what(), HasSubstr("--device sim"));
    }
  }
}

#if VRAM_HAVE_CUDA_H
TEST_F(cuda_availability, constructing_a_cuda_device_is_a_usage_error) {
  try {
    cuda_device dev;
    FAIL() << "a cuda_device was made without a GPU";
  } catch (const usage_error& e) {
    EXPECT_EQ(std::string(e.what()), "CUDA is not available: " + why_);
  }
}
#endif

// ---- on a GPU -------------------------------------------------------------------------------------------
#if VRAM_HAVE_CUDA_H

class CudaGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_available(&why)) GTEST_SKIP() << "no GPU: " << why;
    dev_ = std::make_unique<cuda_device>();
    api_ = detail::load_cuda_api(nullptr);
  }
  void TearDown() override {
    if (dev_) {
      dev_->validate();
      EXPECT_EQ(dev_->held_bytes(), 0u) << "a test left memory held";
    }
  }
  std::uint64_t calls(device_call c) const { return dev_->calls().calls(c); }

  std::unique_ptr<cuda_device> dev_;
  const detail::cuda_api* api_ = nullptr;
};

TEST_F(CudaGpu, reads_the_properties) {
  EXPECT_FALSE(dev_->gpu_name().empty());
  EXPECT_GE(dev_->compute_capability().first, 3);
  EXPECT_GE(dev_->driver_version(), 12000);  // cuGetProcAddress_v2 exists from 12.0
  EXPECT_GT(dev_->total_memory(), 0u);
  const std::size_t g = dev_->granularity();
  EXPECT_GT(g, 0u);
  EXPECT_EQ(g & (g - 1), 0u) << g;
  EXPECT_THAT(dev_->name(), HasSubstr(dev_->gpu_name() + " (cuda:0, "));
  EXPECT_FALSE(dev_->simulated());
  const memory_info m = dev_->mem_info();
  EXPECT_EQ(m.total, dev_->total_memory());
  EXPECT_LE(m.free, m.total);
  EXPECT_EQ(calls(device_call::mem_get_info), 1u);
}

TEST_F(CudaGpu, legacy_malloc_and_free) {
  const memory_info before = dev_->mem_info();
  const device_ptr p = dev_->legacy_malloc(1 * GiB);
  ASSERT_NE(p, 0u);
  EXPECT_EQ(p % 256, 0u);  // cuMemAlloc aligns to at least 256 bytes
  EXPECT_EQ(dev_->held_bytes(), 1 * GiB);
  EXPECT_GE(before.free - dev_->mem_info().free, 1 * GiB);
  // The memory is there: write it and read a byte back.
  ASSERT_EQ(api_->memset_d8(p, 0xab, 1 * GiB), CUDA_SUCCESS);
  unsigned char last = 0;
  ASSERT_EQ(api_->memcpy_dtoh(&last, p + 1 * GiB - 1, 1), CUDA_SUCCESS);
  EXPECT_EQ(last, 0xab);
  dev_->legacy_free(p);
  EXPECT_EQ(dev_->held_bytes(), 0u);
  EXPECT_EQ(calls(device_call::legacy_malloc), 1u);
  EXPECT_EQ(calls(device_call::legacy_free), 1u);
  EXPECT_GT(dev_->calls().nanoseconds[static_cast<std::size_t>(device_call::legacy_malloc)], 0u);
  // A second free is the driver's error, named.
  try {
    dev_->legacy_free(p);
    FAIL() << "a double free passed";
  } catch (const device_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cuMemFree(0x"));
    EXPECT_THAT(e.what(), HasSubstr("failed: CUDA_ERROR_"));
  }
  EXPECT_EQ(dev_->legacy_malloc(0), 0u);
}

TEST_F(CudaGpu, out_of_memory_returns_zero) {
  const std::size_t huge = round_up(2 * dev_->total_memory(), dev_->granularity());
  EXPECT_EQ(dev_->legacy_malloc(huge), 0u);
  EXPECT_EQ(dev_->mem_create(huge), 0u);
  EXPECT_EQ(dev_->held_bytes(), 0u);
  // The failure is not sticky: the next allocation succeeds.
  const device_ptr p = dev_->legacy_malloc(2 * MiB);
  ASSERT_NE(p, 0u);
  dev_->legacy_free(p);
}

// Reserve 4 granules, map two handles of 2 granules side by side, grant access, write through the whole
// range, unmap it with one call, release the handles, free the reservation.
TEST_F(CudaGpu, virtual_memory_round_trip) {
  const std::size_t g = dev_->granularity();
  const device_ptr va = dev_->address_reserve(4 * g);
  ASSERT_NE(va, 0u);
  EXPECT_EQ(va % g, 0u);
  const phys_handle h1 = dev_->mem_create(2 * g);
  const phys_handle h2 = dev_->mem_create(2 * g);
  ASSERT_NE(h1, 0u);
  ASSERT_NE(h2, 0u);
  EXPECT_EQ(dev_->held_bytes(), 4 * g);
  dev_->mem_map(va, 2 * g, h1);
  dev_->mem_map(va + 2 * g, 2 * g, h2);
  dev_->set_access(va, 4 * g);
  ASSERT_EQ(api_->memset_d8(va, 0x5a, 4 * g), CUDA_SUCCESS);
  std::vector<unsigned char> back(2);
  ASSERT_EQ(api_->memcpy_dtoh(back.data(), va + 2 * g - 1, 2), CUDA_SUCCESS);  // across the two handles
  EXPECT_EQ(back[0], 0x5a);
  EXPECT_EQ(back[1], 0x5a);
  dev_->mem_unmap(va, 4 * g);
  dev_->mem_release(h1);
  dev_->mem_release(h2);
  EXPECT_EQ(dev_->held_bytes(), 0u);
  dev_->address_free(va, 4 * g);
  EXPECT_EQ(calls(device_call::address_reserve), 1u);
  EXPECT_EQ(calls(device_call::mem_create), 2u);
  EXPECT_EQ(calls(device_call::mem_map), 2u);
  EXPECT_EQ(calls(device_call::set_access), 1u);
  EXPECT_EQ(calls(device_call::mem_unmap), 1u);
  EXPECT_EQ(calls(device_call::mem_release), 2u);
  EXPECT_EQ(calls(device_call::address_free), 1u);
}

// A handle released while mapped stays usable until unmapped, as the seam says.
TEST_F(CudaGpu, release_while_mapped_keeps_the_memory_until_unmapped) {
  const std::size_t g = dev_->granularity();
  const device_ptr va = dev_->address_reserve(g);
  const phys_handle h = dev_->mem_create(g);
  ASSERT_NE(h, 0u);
  dev_->mem_map(va, g, h);
  dev_->mem_release(h);
  dev_->set_access(va, g);
  EXPECT_EQ(api_->memset_d8(va, 1, g), CUDA_SUCCESS);
  dev_->mem_unmap(va, g);
  dev_->address_free(va, g);
}

TEST_F(CudaGpu, errors_name_the_call_and_the_driver_error) {
  const std::size_t g = dev_->granularity();
  const phys_handle h = dev_->mem_create(g);
  ASSERT_NE(h, 0u);
  try {
    dev_->mem_map(0x1000, g, h);  // not inside any reservation
    FAIL() << "mem_map of an unreserved address passed";
  } catch (const device_error& e) {
    EXPECT_THAT(e.what(), StartsWith("cuMemMap(va=0x1000, " + std::to_string(g) + " bytes, handle=0x"));
    EXPECT_THAT(e.what(), HasSubstr(") failed: CUDA_ERROR_"));
  }
  dev_->mem_release(h);
  EXPECT_THROW(dev_->mem_release(h), device_error);  // released twice
  try {
    dev_->address_reserve(g + 1);  // not a multiple of the granularity
    FAIL() << "a reservation of granularity + 1 bytes passed";
  } catch (const device_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cuMemAddressReserve("));
    EXPECT_THAT(e.what(), HasSubstr("CUDA_ERROR_INVALID_VALUE"));
  }
}

TEST_F(CudaGpu, events_and_streams) {
  const event_id e = dev_->event_create();
  ASSERT_NE(e, 0u);
  EXPECT_TRUE(dev_->event_query(e));  // never recorded: complete
  dev_->event_record(e, 0);
  dev_->event_synchronize(e);
  EXPECT_TRUE(dev_->event_query(e));
  dev_->stream_synchronize(0);
  dev_->device_synchronize();
  dev_->event_destroy(e);
  EXPECT_EQ(calls(device_call::event_record), 1u);
  EXPECT_EQ(calls(device_call::event_query), 2u);
  EXPECT_EQ(calls(device_call::event_synchronize), 1u);
  EXPECT_EQ(calls(device_call::stream_synchronize), 1u);
  EXPECT_EQ(calls(device_call::device_synchronize), 1u);
}

// Another thread has no context current: the device makes its own current there.
TEST_F(CudaGpu, works_from_other_threads) {
  std::vector<std::thread> threads;
  std::vector<device_ptr> got(4, 0);
  for (std::size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      got[i] = dev_->legacy_malloc(4 * MiB);
      if (got[i] != 0) dev_->legacy_free(got[i]);
    });
  }
  for (auto& t : threads) t.join();
  for (device_ptr p : got) EXPECT_NE(p, 0u);
  EXPECT_EQ(calls(device_call::legacy_malloc), 4u);
  EXPECT_EQ(calls(device_call::legacy_free), 4u);
}

TEST_F(CudaGpu, open_device_chooses_the_gpu) {
  const device_choice a = open_device(parse_device_spec("auto"));
  EXPECT_FALSE(a.simulated);
  EXPECT_FALSE(a.dev->simulated());
  EXPECT_THAT(a.note, StartsWith("running on "));
  const device_choice c = open_device(parse_device_spec("cuda:0"));
  EXPECT_FALSE(c.simulated);
  EXPECT_EQ(c.note, "");
  int count = 0;
  ASSERT_EQ(api_->device_get_count(&count), CUDA_SUCCESS);
  EXPECT_THROW(open_device(parse_device_spec("cuda:" + std::to_string(count))), usage_error);
}

// On a GPU nothing else uses, the whole free memory comes in one block to the granularity, or close to it.
TEST_F(CudaGpu, probe_finds_the_free_memory) {
  const probe_result r = probe(*dev_);
  EXPECT_GT(r.largest.bytes, 0u);
  EXPECT_LE(r.largest.bytes, r.before.free);
  EXPECT_EQ(r.largest.bytes % dev_->granularity(), 0u);
  EXPECT_LE(r.halving.bytes, r.largest.bytes);
  EXPECT_GE(r.allocatable, r.largest.bytes);
  EXPECT_LE(r.allocatable, r.before.free);
  EXPECT_EQ(dev_->held_bytes(), 0u);
  std::printf("probe: free %zu, largest %zu in %u tries, halving %zu in %u tries, allocatable %zu in %zu blocks\n",
              r.before.free, r.largest.bytes, r.largest.tries, r.halving.bytes, r.halving.tries, r.allocatable, r.blocks);
}

#endif  // VRAM_HAVE_CUDA_H

}  // namespace
}  // namespace vram
