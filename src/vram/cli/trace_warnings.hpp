#pragma once
// Words for what check_trace finds, shared by replay (which warns and goes on) and convert / check
// (which refuse a trace whose frees do not match, unless told to go on).

#include <string>

#include "vram/trace/trace_check.hpp"

namespace vram::cli {

/// @brief "" for a clean trace; otherwise one line per kind of problem, naming the first row (as a CSV line).
std::string describe_problems(const std::string& path, const trace& t, const trace_check& c);

}  // namespace vram::cli
