#pragma once
// The report as one HTML file that opens from disk with no network: the data (report_data.hpp) as JSON,
// the page's own script and style, and the chart library (uPlot) where the build bundled it; without it,
// the memory chart is a static SVG drawn here and the page says how to get the interactive one.

#include <string>

#include <nlohmann/json.hpp>

namespace vram {

/// @brief The page for @p data: {"traces": [report_trace(...), ...], "device": ..., "command": ...}.
/// @p with_chart_library false draws the static charts even where the library is bundled (tests).
std::string render_report_page(nlohmann::json data, bool with_chart_library = true);

/// @brief True when this build bundled the chart library.
bool report_has_chart_library();

}  // namespace vram
