#pragma once
// Words for what check_trace finds, shared by replay and fit (which warn and go on) and convert / check
// (which refuse a trace whose frees do not match, unless told to go on).

#include <string>

#include "vram/trace/trace_check.hpp"

namespace vram::cli {

/// @brief "" for a clean trace; otherwise one line per kind of problem, naming the first row (as a CSV line).
std::string describe_problems(const std::string& path, const trace& t, const trace_check& c);

/// @brief For replay and fit, which go on: "" for a clean trace; otherwise the problems, each line starting
/// "warning: ", and a last line on what the replay does with such rows.
std::string replay_warnings(const std::string& path, const trace& t);

}  // namespace vram::cli
