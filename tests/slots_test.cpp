// take_slot: freed indexes first, the last freed first, then new slots at the end.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vram/core/slots.hpp"

namespace vram::detail {
namespace {

TEST(Slots, ReusesTheLastFreedIndexThenAppends) {
  std::vector<std::string> slots;
  std::vector<std::uint32_t> freed;
  EXPECT_EQ(take_slot(slots, freed), 0u);  // nothing freed: a new slot, empty
  slots[0] = "a";
  EXPECT_EQ(take_slot(slots, freed), 1u);
  slots[1] = "b";
  EXPECT_EQ(take_slot(slots, freed), 2u);
  slots[2] = "c";
  freed = {0, 2};  // 0 freed, then 2
  EXPECT_EQ(take_slot(slots, freed), 2u);  // the last freed first, its old value left for the caller
  EXPECT_EQ(slots[2], "c");
  EXPECT_EQ(take_slot(slots, freed), 0u);
  EXPECT_TRUE(freed.empty());
  EXPECT_EQ(take_slot(slots, freed), 3u);  // none left: appended, value-initialised
  EXPECT_EQ(slots.size(), 4u);
  EXPECT_EQ(slots[3], "");
}

}  // namespace
}  // namespace vram::detail
