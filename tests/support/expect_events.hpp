#pragma once
// Asserts that a reader gave exactly the events a test worked out by hand, naming the first that differs.

#include <gtest/gtest.h>

#include <vector>

#include "vram/trace/trace.hpp"

namespace vram::test {

inline bool same_event(const trace_event& x, const trace_event& y) {
  return x.time_us == y.time_us && x.addr == y.addr && x.size == y.size && x.stream == y.stream && x.action == y.action;
}

inline void expect_events(const std::vector<trace_event>& got, const std::vector<trace_event>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(same_event(got[i], want[i])) << "event " << i << ": " << to_string(got[i].action)
                                             << " t=" << got[i].time_us << " addr=" << got[i].addr
                                             << " size=" << got[i].size << " stream=" << got[i].stream;
}

}  // namespace vram::test
