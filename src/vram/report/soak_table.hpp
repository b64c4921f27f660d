#pragma once
// The soak report (replay/soak.hpp) as a table for people.

#include <string>

#include "vram/replay/soak.hpp"

namespace vram {

/// @brief The report as a table for people, with a heading and a line explaining creep.
std::string format_soak_table(const soak_report& report);

}  // namespace vram
