// The cost probe and cost model files, on the simulated device, whose calls cost what its model says: a probe
// there must give back that model at the sizes probed, each figure worked out from cost_model.cpp's table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "vram/core/error.hpp"
#include "vram/device/cost_model.hpp"
#include "vram/device/cost_probe.hpp"
#include "vram/device/device_spec.hpp"
#include "vram/device/sim_device.hpp"

namespace vram {
namespace {

using ::testing::HasSubstr;

const cost_sample* find(const cost_probe_result& r, device_call kind, std::size_t bytes) {
  for (const auto& s : r.samples)
    if (s.kind == kind && s.bytes == bytes) return &s;
  return nullptr;
}

// The table's points come back at its own sizes; at 64 MiB, halfway in log2 between its 32 and 128 MiB
// points, the probe finds the mean of the two: cuMemCreate (12.5 + 8.0) / 2 = 10.25 us, cuMemSetAccess
// (38 + 33) / 2 = 35.5 us, cuMemUnmap (23 + 20) / 2 = 21.5 us, cuMemRelease (25.5 + 39.5) / 2 = 32.5 us.
TEST(CostProbe, OnTheSimulatedDeviceItGivesBackTheTable) {
  sim_device dev;
  cost_probe_options o;
  o.rounds = 3;
  const cost_probe_result r = measure_costs(dev, o);
  const cost_model& m = r.model;
  EXPECT_EQ(m.cost(device_call::mem_create, 2 * MiB), 8'500u);
  EXPECT_EQ(m.cost(device_call::mem_create, 64 * MiB), 10'250u);
  EXPECT_EQ(m.cost(device_call::set_access, 64 * MiB), 35'500u);
  EXPECT_EQ(m.cost(device_call::set_access, 512 * MiB), 45'000u);
  EXPECT_EQ(m.cost(device_call::mem_unmap, 64 * MiB), 21'500u);
  EXPECT_EQ(m.cost(device_call::mem_release, 64 * MiB), 32'500u);
  EXPECT_EQ(m.cost(device_call::mem_map, 8 * MiB), 700u);
  EXPECT_EQ(m.cost(device_call::legacy_malloc, 2 * MiB), 42'300u);
  EXPECT_EQ(m.cost(device_call::legacy_free, 1 * GiB), 579'300u);
  EXPECT_EQ(m.cost(device_call::event_record, 0), 2'000u);
  EXPECT_EQ(m.cost(device_call::device_synchronize, 0), 5'000u);
  // Beyond the sizes probed a curve is held at its end: the table's 1 GiB handle point was not probed.
  EXPECT_EQ(m.cost(device_call::set_access, 1 * GiB), 45'000u);

  // 6 handle sizes x 7 virtual memory kinds, 5 legacy sizes x 2, 7 calls without a size; 3 calls each.
  EXPECT_EQ(r.samples.size(), 6u * 7 + 5 * 2 + 7);
  for (const auto& s : r.samples) {
    EXPECT_EQ(s.calls, 3u) << to_string(s.kind) << " " << s.bytes;
    EXPECT_EQ(s.min_ns, s.max_ns);
  }
  const cost_sample* sa = find(r, device_call::set_access, 32 * MiB);
  ASSERT_NE(sa, nullptr);
  EXPECT_EQ(sa->median_ns, 38'000.0);
  EXPECT_TRUE(r.skipped.empty());
}

// The lent H200's model is the table scaled per kind: cuMemSetAccess x1.24 (22 us -> 27.28 us at 2 MiB),
// cuMemCreate x1.56 (8.5 us -> 13.26 us).
TEST(CostProbe, FindsTheModelTheDeviceRunsUnder) {
  sim_device_options so;
  so.costs = cost_model::h200_lent();
  sim_device dev(so);
  cost_probe_options o;
  o.rounds = 1;
  o.handle_sizes = {2 * MiB};
  o.legacy_sizes = {2 * MiB};
  const cost_probe_result r = measure_costs(dev, o);
  EXPECT_EQ(r.model.cost(device_call::set_access, 2 * MiB), 27'280u);
  EXPECT_EQ(r.model.cost(device_call::mem_create, 2 * MiB), 13'260u);
  EXPECT_EQ(r.model.cost(device_call::legacy_malloc, 2 * MiB), 63'873u);  // 42.3 us x 1.51
}

// On a 1 GiB device each size takes at most half the free memory, 512 MiB: one 512 MiB handle, two 256 MiB
// blocks, and no 1 GiB block at all. The device is left as it was found.
TEST(CostProbe, TakesAtMostHalfTheFreeMemoryAndLeavesTheDeviceAsItWas) {
  sim_device_options so;
  so.capacity = 1 * GiB;
  sim_device dev(so);
  const std::size_t free_before = dev.mem_info().free;
  cost_probe_options o;
  o.handle_sizes = {2 * MiB, 512 * MiB};
  o.legacy_sizes = {256 * MiB, 1 * GiB};
  const cost_probe_result r = measure_costs(dev, o);
  EXPECT_EQ(dev.mem_info().free, free_before);
  ASSERT_NE(find(r, device_call::mem_create, 2 * MiB), nullptr);
  EXPECT_EQ(find(r, device_call::mem_create, 2 * MiB)->calls, 16u);
  ASSERT_NE(find(r, device_call::set_access, 512 * MiB), nullptr);
  EXPECT_EQ(find(r, device_call::set_access, 512 * MiB)->calls, 1u);
  ASSERT_NE(find(r, device_call::legacy_malloc, 256 * MiB), nullptr);
  EXPECT_EQ(find(r, device_call::legacy_malloc, 256 * MiB)->calls, 2u);
  EXPECT_EQ(find(r, device_call::legacy_malloc, 1 * GiB), nullptr);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].first, device_call::legacy_malloc);
  EXPECT_EQ(r.skipped[0].second, 1 * GiB);
}

TEST(CostProbe, RefusesOptionsItCannotMeasure) {
  sim_device dev;
  cost_probe_options o;
  o.rounds = 0;
  EXPECT_THROW(measure_costs(dev, o), usage_error);
  o.rounds = 1;
  o.handle_sizes = {3 * MiB};
  try {
    measure_costs(dev, o);
    FAIL() << "a 3 MiB handle on a device of 2 MiB granules was measured";
  } catch (const usage_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("not a multiple of the granularity"));
  }
  o.handle_sizes = {};
  o.legacy_sizes = {};
  EXPECT_THROW(measure_costs(dev, o), usage_error);
}

// to_json() then from_json() is the same model at every size, between points too (16 MiB, 300 MiB).
TEST(CostModelJson, ARoundTripKeepsEveryCost) {
  const cost_model table = cost_model::h200_lent();
  const cost_model back = cost_model::from_json(table.to_json(), cost_model::zero(), "test");
  for (std::size_t k = 0; k < device_call_kinds; ++k) {
    const auto kind = static_cast<device_call>(k);
    for (std::size_t bytes : {std::size_t{0}, 4 * KiB, 2 * MiB, 16 * MiB, 300 * MiB, 4 * GiB})
      EXPECT_EQ(back.cost(kind, bytes), table.cost(kind, bytes)) << to_string(kind) << " " << bytes;
  }
}

// A file may give only some kinds: the others keep the base model's.
TEST(CostModelJson, KindsLeftOutKeepTheBase) {
  const auto j = nlohmann::json::parse(R"({"curves": {"set_access": [[2097152, 1000], [8388608, 3000]]}})");
  const cost_model m = cost_model::from_json(j, cost_model::h200(), "test");
  EXPECT_EQ(m.cost(device_call::set_access, 2 * MiB), 1'000u);
  EXPECT_EQ(m.cost(device_call::set_access, 4 * MiB), 2'000u);  // halfway in log2
  EXPECT_EQ(m.cost(device_call::mem_create, 2 * MiB), 8'500u);  // the table's
}

TEST(CostModelJson, BadModelsAreRefusedWithTheReason) {
  auto why = [](const char* text) {
    try {
      cost_model::from_json(nlohmann::json::parse(text), cost_model::h200(), "m.json");
    } catch (const input_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(why(R"([1, 2])"), HasSubstr("m.json: not a cost model"));
  EXPECT_THAT(why(R"({"curves": {"mem_teleport": [[1, 2]]}})"), HasSubstr("unknown call kind \"mem_teleport\""));
  EXPECT_THAT(why(R"({"curves": {"mem_map": []}})"), HasSubstr("mem_map: expected a non-empty list"));
  EXPECT_THAT(why(R"({"curves": {"mem_map": [[2097152]]}})"), HasSubstr("is not [bytes, ns]"));
  EXPECT_THAT(why(R"({"curves": {"mem_map": [[-5, 10]]}})"), HasSubstr("is not [bytes, ns]"));
  EXPECT_THAT(why(R"({"curves": {"mem_map": [[8, 10], [4, 10]]}})"), HasSubstr("sizes must ascend"));
  EXPECT_THAT(why(R"({"curves": {"mem_map": [[8, -1]]}})"), HasSubstr("costs >= 0"));
}

std::string temp_file(const std::string& name, const std::string& text) {
  const auto path = (std::filesystem::temp_directory_path() / ("vram_cost_probe_test_" + std::to_string(getpid()) + "_" + name)).string();
  std::ofstream(path) << text;
  return path;
}

TEST(CostModelFile, AMissingOrBrokenFileIsNamed) {
  try {
    cost_model::read_file("/nonexistent/costs.json");
    FAIL();
  } catch (const input_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/costs.json: cannot open the cost model"));
  }
  const auto broken = temp_file("broken.json", "{\"curves\": ");
  try {
    cost_model::read_file(broken);
    FAIL();
  } catch (const input_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(broken + ": not JSON"));
  }
  std::remove(broken.c_str());
  const std::string folder = std::filesystem::temp_directory_path().string();
  try {
    cost_model::read_file(folder);
    FAIL();
  } catch (const input_error& e) {
    EXPECT_EQ(std::string(e.what()), folder + ": cannot open the cost model: it is a folder");
  }
}

// --device sim:costs=FILE: the simulated device runs under the file's model and says so in its name.
TEST(CostModelFile, TheDeviceSpecTakesAFile) {
  const auto path = temp_file("costs.json", R"({"curves": {"legacy_malloc": [[1, 100000]]}})");
  const device_spec s = parse_device_spec("sim:80GiB,costs=" + path);
  EXPECT_EQ(s.costs_file, path);
  const sim_device_options o = sim_options(s);
  EXPECT_EQ(o.costs.cost(device_call::legacy_malloc, 64 * MiB), 100'000u);
  EXPECT_EQ(o.costs.cost(device_call::legacy_free, 2 * MiB), 36'300u);  // the table's
  EXPECT_THAT(o.label, HasSubstr("(costs from " + path + ")"));
  std::remove(path.c_str());

  EXPECT_THROW(parse_device_spec("sim:costs="), usage_error);
  EXPECT_THROW(parse_device_spec("sim:costs=lent,costs=" + path), usage_error);
  EXPECT_THROW(sim_options(parse_device_spec("sim:costs=/nonexistent/costs.json")), input_error);
}

}  // namespace
}  // namespace vram
