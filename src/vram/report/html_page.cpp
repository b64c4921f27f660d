#include "vram/report/html_page.hpp"

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/report/report_assets.hpp"
#include "vram/report/svg_chart.hpp"

namespace vram {

namespace {

constexpr const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"};

/// JSON inside <script>: nothing in it may close the element or open a comment.
std::string script_safe(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    if (json[i] == '<' && (json.compare(i, 2, "</") == 0 || json.compare(i, 4, "<!--") == 0)) {
      out += "\\u003c";
      continue;
    }
    out += json[i];
  }
  return out;
}

/// Fills the next slot after @p from, so that text put in (a trace's name) is never taken for a slot.
void put(std::string& page, std::size_t& from, std::string_view slot, std::string_view text) {
  const auto at = page.find(slot, from);
  if (at == std::string::npos) throw invariant_error(fmt::format("report page: no slot {} in order", slot));
  page.replace(at, slot.size(), text);
  from = at + text.size();
}

std::string static_memory_chart(const nlohmann::json& series) {
  if (!series.contains("seconds")) return {};
  const auto x = series["seconds"].get<std::vector<double>>();
  std::vector<svg_line> lines;
  const auto gib = [](const nlohmann::json& v) {
    std::vector<double> y;
    for (const auto& b : v) y.push_back(b.get<double>() / static_cast<double>(std::size_t{1} << 30));
    return y;
  };
  lines.push_back({"live", "#333333", gib(series["live"]["high"])});
  std::size_t c = 0;
  for (const auto& r : series["reserved"])
    lines.push_back({r["policy"].get<std::string>() + " reserved", colours[c++ % std::size(colours)], gib(r["high"])});
  return svg_line_chart(x, lines, {"seconds from the trace's start", "GiB", 960, 340});
}

std::string curve_chart(const nlohmann::json& curve) {
  std::vector<svg_point> points;
  for (const auto& p : curve)
    points.push_back({p["driver_share"].get<double>() * 100.0, p["reserved_over_live"].get<double>(),
                      p["setting"].get<std::string>(), p["default"].get<bool>()});
  return svg_scatter(points, {"driver time, % of the trace (modelled)", "peak reserved / peak live", 720, 300});
}

}  // namespace

bool report_has_chart_library() { return !report_assets::chart_library().empty(); }

std::string render_report_page(nlohmann::json data, bool with_chart_library) {
  const bool library = with_chart_library && report_has_chart_library();
  data["chart_library"] = library ? nlohmann::json(std::string(report_assets::chart_version())) : nlohmann::json(nullptr);
  data["architecture_svg"] = std::string(report_assets::architecture());
  for (auto& t : data["traces"]) {
    if (!library) t["static_chart"] = static_memory_chart(t["series"]);
    if (t.contains("curve") && !t["curve"].empty()) t["curve_svg"] = curve_chart(t["curve"]);
  }
  std::string page(report_assets::page());
  std::size_t from = 0;  // the slots, in the order web/report.html has them
  put(page, from, "{{STYLE}}", report_assets::style());
  put(page, from, "{{CHART_STYLE}}", library ? report_assets::chart_style() : std::string_view{});
  put(page, from, "{{DATA}}", script_safe(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  put(page, from, "{{CHART_LIBRARY}}", library ? report_assets::chart_library() : std::string_view{});
  put(page, from, "{{SCRIPT}}", report_assets::script());
  return page;
}

}  // namespace vram
