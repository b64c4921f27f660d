#include "vram/report/html_page.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vram/core/error.hpp"
#include "vram/report/report_assets.hpp"
#include "vram/report/report_data.hpp"
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

/// At most @p most points: the highest of each run of buckets, so the chart keeps every peak.
std::vector<double> reduced(const std::vector<std::size_t>& high, std::size_t group) {
  std::vector<double> y;
  for (std::size_t i = 0; i < high.size(); i += group) {
    std::size_t m = 0;
    for (std::size_t k = i; k < std::min(high.size(), i + group); ++k) m = std::max(m, high[k]);
    y.push_back(static_cast<double>(m) / static_cast<double>(std::size_t{1} << 30));
  }
  return y;
}

std::string static_memory_chart(const nlohmann::json& series) {
  if (!series.contains("buckets")) return {};
  constexpr std::size_t most = 1200;  // points a line: about one per pixel
  const std::size_t buckets = series["buckets"];
  const std::size_t group = (buckets + most - 1) / most;
  const double step = series["bucket_seconds"].get<double>() * static_cast<double>(group);
  std::vector<double> x;
  for (std::size_t i = 0; i < buckets; i += group) x.push_back(static_cast<double>(i / group) * step);
  std::vector<svg_line> lines;
  lines.push_back({"live", "#333333", reduced(delta_decode(series["live"]["high"]), group)});
  std::size_t c = 0;
  for (const auto& r : series["reserved"])
    lines.push_back({r["policy"].get<std::string>() + " reserved", colours[c++ % std::size(colours)],
                     reduced(delta_decode(r["high"]), group)});
  return svg_line_chart(x, lines, {"seconds from the trace's start", "GiB", 960, 340});
}

std::string curve_chart(const nlohmann::json& curve) {
  std::vector<svg_point> points;
  for (const auto& p : curve) {
    const double x = p["driver_share"].get<double>() * 100.0, y = p["reserved_over_live"].get<double>();
    std::string label = p["setting"].get<std::string>();
    if (label == "small_handle=0") label += " (max_handle always)";  // 0: no smaller handles outside a burst
    const auto failed = p.value("failed_allocations", std::uint64_t{0});
    if (failed > 0) label += fmt::format(" ({} failed)", failed);
    const bool highlight = p["default"].get<bool>();
    // Settings that land on the same point share it, and one label.
    const auto same = std::find_if(points.begin(), points.end(), [&](const svg_point& q) { return q.x == x && q.y == y; });
    if (same != points.end()) {
      same->label += "\n" + label;  // a line each
      same->highlight = same->highlight || highlight;
      same->alert = same->alert || failed > 0;
    } else {
      points.push_back({x, y, label, highlight, failed > 0});
    }
  }
  svg_frame frame{"driver time, % of the trace (modelled)", "peak reserved / peak live", 720, 300};
  frame.y_floor = 1.0;  // nothing reserves less than it holds
  return svg_scatter(points, frame);
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
