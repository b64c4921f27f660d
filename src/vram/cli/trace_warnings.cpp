// Describing a trace's unmatched and double frees for people.
#include "vram/cli/trace_warnings.hpp"

#include <fmt/format.h>

namespace vram::cli {

std::string describe_problems(const std::string& path, const trace& t, const trace_check& c) {
  std::string s;
  // Event i sits on line i + 2 of a CSV (line 1 is the header).
  auto row = [&](std::size_t i) {
    return fmt::format("line {} ({} of {} bytes at address {:#x})", i + 2, to_string(t.events[i].action),
                       t.events[i].size, t.events[i].addr);
  };
  if (c.unmatched_frees > 0)
    s += fmt::format("{}: {} free(s) of an address never allocated, first at {}\n", path, c.unmatched_frees,
                     row(*c.first_unmatched_free));
  if (c.double_frees > 0)
    s += fmt::format("{}: {} double free(s), first at {}\n", path, c.double_frees, row(*c.first_double_free));
  if (c.duplicate_allocs > 0)
    s += fmt::format("{}: {} alloc(s) at an address still live, first at {}\n", path, c.duplicate_allocs,
                     row(*c.first_duplicate_alloc));
  return s;
}

}  // namespace vram::cli
