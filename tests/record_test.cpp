// vram record's assembly of what the recorder saw (src/vram/record/memory_ops.hpp), worked out by hand, and
// the file names of a recording's devices. The recorder itself runs on a GPU (tests/gpu/record_check.py).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/expect_events.hpp"
#include "vram/record/memory_ops.hpp"
#include "vram/trace/trace_recorder.hpp"

namespace vram {
namespace {

using k = memory_op::kind;
using a = trace_action;

using test::expect_events;

TEST(RecordedOps, SortsByTimeAndTakesReleaseSizesFromTheirAllocations) {
  // Records arrive out of order (CUPTI delivers buffers late); releases carry no size.
  const std::vector<memory_op> ops = {
      {3'000, k::release, 0, 0x1000, 0, 0},
      {1'000, k::allocate, 0, 0x1000, 4096, 0},
      {2'000, k::allocate, 0, 0x2000, 512, 7},
      {2'000, k::release, 0, 0x9000, 0, 0},  // never allocated here: dropped, counted
      {4'500, k::release, 0, 0x2000, 512, 7},
  };
  const recorded_traces r = to_traces(ops, "run");
  ASSERT_EQ(r.by_device.size(), 1u);
  const trace& t = r.by_device.at(0);
  EXPECT_EQ(t.name, "run");
  expect_events(t.events, {{1, 0x1000, 4096, 0, a::alloc},
                           {2, 0x2000, 512, 7, a::alloc},
                           {3, 0x1000, 4096, 0, a::free_requested},
                           {4, 0x2000, 512, 7, a::free_requested}});
  EXPECT_EQ(r.unmatched_releases, 1u);
  EXPECT_EQ(r.mapped_records, 0u);
}

TEST(RecordedOps, GivesEachDeviceItsTrace) {
  const std::vector<memory_op> ops = {{1'000, k::allocate, 1, 0x1000, 64, 0}, {2'000, k::allocate, 0, 0x1000, 32, 0}};
  const recorded_traces r = to_traces(ops, "run");
  ASSERT_EQ(r.by_device.size(), 2u);
  EXPECT_EQ(r.by_device.at(0).name, "run");
  EXPECT_EQ(r.by_device.at(1).name, "run.dev1");
  expect_events(r.by_device.at(1).events, {{1, 0x1000, 64, 0, a::alloc}});
  expect_events(r.by_device.at(0).events, {{2, 0x1000, 32, 0, a::alloc}});
}

TEST(RecordedOps, MappedMemoryIsAMappingAndNoAllocation) {
  // As CUPTI reported cuMemMap on an H200: the mapping (from the driver callback), then a memory record of an
  // allocation at the mapped address, its release, the unmap. Later the same address is a cuMemAlloc of its own.
  const std::uint64_t va = 0x7f0000000000, MiB = 1 << 20;
  const std::vector<memory_op> ops = {
      {1'000, k::map, 0, va, 2 * MiB, 0},
      {1'100, k::allocate, 0, va, 2 * MiB, 0},
      {1'900, k::release, 0, va, 2 * MiB, 0},
      {2'000, k::unmap, 0, va, 2 * MiB, 0},
      {3'000, k::allocate, 0, va, 5 * MiB, 0},
      {4'000, k::release, 0, va, 0, 0},
  };
  const recorded_traces r = to_traces(ops, "run");
  expect_events(r.by_device.at(0).events, {{1, va, 2 * MiB, 0, a::segment_map},
                                           {2, va, 2 * MiB, 0, a::segment_unmap},
                                           {3, va, 5 * MiB, 0, a::alloc},
                                           {4, va, 5 * MiB, 0, a::free_requested}});
  EXPECT_EQ(r.mapped_records, 2u);
  EXPECT_EQ(r.unmatched_releases, 0u);
}

TEST(RecordingPath, NamesEachDeviceFile) {
  EXPECT_EQ(device_recording_path("run.vram", 0), "run.vram");
  EXPECT_EQ(device_recording_path("run.vram", 2), "run.dev2.vram");
  EXPECT_EQ(device_recording_path("out/run.vram.gz", 1), "out/run.dev1.vram.gz");
  EXPECT_EQ(device_recording_path("a.b/run", 1), "a.b/run.dev1");
  EXPECT_EQ(device_recording_path(".hidden", 1), ".hidden.dev1");
}

}  // namespace
}  // namespace vram
