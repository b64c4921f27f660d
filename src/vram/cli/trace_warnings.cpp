// Describing a trace's unmatched and double frees for people.
#include "vram/cli/trace_warnings.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace vram::cli {

std::string describe_problems(const std::string& path, const trace& t, const trace_check& c) {
  std::string s;
  // Events are numbered from 1 in the trace's order: the same number in every format (a CSV's line number
  // would be wrong past a blank line and means nothing in a .vram file).
  auto row = [&](std::size_t i) {
    return fmt::format("event {} ({} of {} bytes at address {:#x})", i + 1, to_string(t.events[i].action),
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
  if (c.wrong_size_frees > 0)
    s += fmt::format("{}: {} free(s) with a size other than their alloc's, first at {}\n", path,
                     c.wrong_size_frees, row(*c.first_wrong_size_free));
  return s;
}

std::string replay_warnings(const std::string& path, const trace& t) {
  const std::string problems = describe_problems(path, t, check_trace(t));
  if (problems.empty()) return problems;
  std::string s;
  for (std::size_t at = 0; at < problems.size();) {
    const std::size_t end = std::min(problems.find('\n', at), problems.size());
    s += "warning: " + problems.substr(at, end - at) + '\n';
    at = end + 1;
  }
  return s + "warning: the replay skips unmatched and double frees, counting them and allocs at live addresses as "
             "unmatched_frees; a free with another size frees its block whole\n";
}

}  // namespace vram::cli
