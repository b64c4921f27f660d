#pragma once
// The files the report page is made of, built into the program (cmake/embed_report_assets.cmake writes
// them from web/ and docs/ at build time), so that `vram report` writes a self-contained page anywhere.

#include <string_view>

namespace vram::report_assets {

std::string_view page();            // web/report.html: the page, with {{...}} where the parts go
std::string_view script();          // web/report.js: draws the page from its data
std::string_view style();           // web/report.css
std::string_view chart_library();   // uPlot's script from web/node_modules, "" where npm did not install it
std::string_view chart_style();     // uPlot's style sheet, likewise
std::string_view chart_version();   // e.g. "uPlot 1.6.32", "" without it
std::string_view architecture();    // docs/architecture-flow.svg, "" where missing

}  // namespace vram::report_assets
