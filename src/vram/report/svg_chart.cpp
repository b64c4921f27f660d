#include "vram/report/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace vram {

namespace {

constexpr int left = 70, right = 20, top = 20, bottom = 45;

std::string escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string tick_text(double v) {
  if (v == 0) return "0";
  return fmt::format("{:g}", std::abs(v) >= 1e4 || std::abs(v) < 1e-3 ? v : std::round(v * 1e6) / 1e6);
}

struct axes {
  double x0, x1, y0, y1;
  int w, h;
  double px(double x) const { return left + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (w - left - right); }
  double py(double y) const { return top + (y1 > y0 ? (y1 - y) / (y1 - y0) : 0.5) * (h - top - bottom); }
};

std::string frame_svg(const axes& a, const svg_frame& f, const std::vector<double>& xt, const std::vector<double>& yt) {
  std::string s = fmt::format(
      R"svg(<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {0} {1}" width="{0}" height="{1}" font-family="sans-serif" font-size="11">)svg",
      a.w, a.h);
  s += fmt::format(R"svg(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#999"/>)svg", left, top,
                   a.w - left - right, a.h - top - bottom);
  for (const double v : xt) {
    const double x = a.px(v);
    s += fmt::format(R"svg(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="#eee"/><text x="{0:.1f}" y="{3}" text-anchor="middle">{4}</text>)svg",
                     x, top, a.h - bottom, a.h - bottom + 14, tick_text(v));
  }
  for (const double v : yt) {
    const double y = a.py(v);
    s += fmt::format(R"svg(<line x1="{0}" x2="{1}" y1="{2:.1f}" y2="{2:.1f}" stroke="#eee"/><text x="{3}" y="{4:.1f}" text-anchor="end">{5}</text>)svg",
                     left, a.w - right, y, left - 6, y + 4, tick_text(v));
  }
  s += fmt::format(R"svg(<text x="{}" y="{}" text-anchor="middle">{}</text>)svg", (left + a.w - right) / 2, a.h - 8,
                   escape(f.x_label));
  s += fmt::format(R"svg(<text transform="translate(14 {}) rotate(-90)" text-anchor="middle">{}</text>)svg",
                   (top + a.h - bottom) / 2, escape(f.y_label));
  return s;
}

std::pair<double, double> span_of(const std::vector<double>& ticks, double lo, double hi) {
  if (ticks.empty()) return {lo, hi};
  return {std::min(lo, ticks.front()), std::max(hi, ticks.back())};
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!(hi > lo) || count < 1) return {lo};
  const double raw = (hi - lo) / count;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> out;
  for (double v = std::floor(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  if (out.back() < hi) out.push_back(out.back() + step);
  return out;
}

std::string svg_line_chart(const std::vector<double>& x, const std::vector<svg_line>& lines, const svg_frame& f) {
  double y_hi = 0;
  for (const auto& l : lines)
    for (const double v : l.y) y_hi = std::max(y_hi, v);
  const double x_lo = x.empty() ? 0 : x.front(), x_hi = x.empty() ? 1 : x.back();
  const auto xt = nice_ticks(x_lo, x_hi), yt = nice_ticks(0, y_hi > 0 ? y_hi : 1);
  const axes a{x_lo, x_hi, 0, span_of(yt, 0, y_hi).second, f.width, f.height};
  std::string s = frame_svg(a, f, std::vector<double>(xt.begin(), std::find_if(xt.begin(), xt.end(), [&](double v) { return v > x_hi; })), yt);
  int legend_x = left + 8;
  for (const auto& l : lines) {
    std::string pts;
    for (std::size_t i = 0; i < x.size() && i < l.y.size(); ++i) pts += fmt::format("{:.1f},{:.1f} ", a.px(x[i]), a.py(l.y[i]));
    s += fmt::format(R"svg(<polyline class="series" data-name="{}" fill="none" stroke="{}" stroke-width="1.5" points="{}"/>)svg",
                     escape(l.name), l.colour, pts);
    s += fmt::format(R"svg(<rect x="{}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}">{}</text>)svg", legend_x,
                     top + 6, l.colour, legend_x + 14, top + 15, escape(l.name));
    legend_x += 24 + static_cast<int>(l.name.size()) * 7;
  }
  return s + "</svg>";
}

std::string svg_scatter(const std::vector<svg_point>& points, const svg_frame& f) {
  double x_lo = 0, x_hi = 0, y_lo = 0, y_hi = 0;
  bool first = true;
  for (const auto& p : points) {
    x_lo = first ? p.x : std::min(x_lo, p.x), x_hi = first ? p.x : std::max(x_hi, p.x);
    y_lo = first ? p.y : std::min(y_lo, p.y), y_hi = first ? p.y : std::max(y_hi, p.y);
    first = false;
  }
  // Some room around the points, so that the extreme ones and their labels sit inside the frame; none below
  // the floor the values cannot pass.
  const double dx = std::max((x_hi - x_lo) * 0.1, std::abs(x_hi) * 0.05 + 1e-9);
  const double dy = std::max((y_hi - y_lo) * 0.1, std::abs(y_hi) * 0.01 + 1e-9);
  const double y_bottom = std::max(y_lo - dy, std::min(f.y_floor, y_lo));
  const auto xt = nice_ticks(std::max(0.0, x_lo - dx), x_hi + dx), yt = nice_ticks(y_bottom, y_hi + dy);
  const auto [ax0, ax1] = span_of(xt, x_lo - dx, x_hi + dx);
  const auto [ay0, ay1] = span_of(yt, y_bottom, y_hi + dy);
  const axes a{ax0, ax1, ay0, ay1, f.width, f.height};
  std::string s = frame_svg(a, f, xt, yt);

  // Labels are placed from the top of the chart down, each where it covers no point and no label placed
  // before: beside its point if it can, else a line (13 px) or more above or below, with a thin line back to the point.
  struct box {
    double x0, y0, x1, y1;
  };
  std::vector<box> placed;  // the points themselves first: no label covers one
  for (const auto& p : points) placed.push_back({a.px(p.x) - 6, a.py(p.y) - 6, a.px(p.x) + 6, a.py(p.y) + 6});
  const auto covers = [&](const box& b) {
    return std::any_of(placed.begin(), placed.end(),
                       [&](const box& q) { return b.x0 < q.x1 && q.x0 < b.x1 && b.y0 < q.y1 && q.y0 < b.y1; });
  };
  std::vector<std::size_t> order(points.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) { return points[i].y > points[j].y; });
  constexpr double char_width = 6.5, line = 13;
  for (const std::size_t i : order) {
    const auto& p = points[i];
    const double cx = a.px(p.x), cy = a.py(p.y);
    std::vector<std::string> rows;  // a label of several lines: one for each setting that shares the point
    for (std::size_t from = 0;;) {
      const auto nl = p.label.find('\n', from);
      rows.push_back(p.label.substr(from, nl == std::string::npos ? std::string::npos : nl - from));
      if (nl == std::string::npos) break;
      from = nl + 1;
    }
    std::size_t longest = 0;
    for (const auto& r : rows) longest = std::max(longest, r.size());
    const double width = char_width * static_cast<double>(longest);
    const double height = line * static_cast<double>(rows.size());
    // To the right of the point, or to its left where the right has not the room and the left has more.
    const double room_right = f.width - right - (cx + 8), room_left = cx - 8 - left;
    const bool leftward = width > room_right && room_left > room_right;
    const double x0 = leftward ? cx - 8 - width : cx + 8;
    // Within the plot's frame: the first place free of the rest, else the nearest inside it.
    const auto inside = [&](double s_k) { return cy + s_k - 9 >= top && cy + s_k - 9 + height <= f.height - bottom; };
    double shift = 0;
    bool found = false, any_inside = false;
    for (int k = 0; k <= 40 && !found; ++k) {
      const double s_k = (k % 2 == 1 ? 1 : -1) * line * ((k + 1) / 2);  // 0, +13, -13, +26, -26, ...
      if (!inside(s_k)) continue;
      if (!any_inside) shift = s_k, any_inside = true;
      if (!covers({x0, cy + s_k - 9, x0 + width, cy + s_k - 9 + height})) shift = s_k, found = true;
    }
    placed.push_back({x0, cy + shift - 9, x0 + width, cy + shift - 9 + height});
    if (shift != 0)
      s += fmt::format(R"svg(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#999999" stroke-width="0.8"/>)svg",
                       cx, cy, leftward ? x0 + width : x0, cy + shift);
    std::string text = escape(rows.front());
    for (std::size_t r = 1; r < rows.size(); ++r)
      text += fmt::format(R"svg(<tspan x="{:.1f}" dy="{}">{}</tspan>)svg", x0, line, escape(rows[r]));
    s += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}"{}{}>{}</text>)svg", x0, cy + shift + 4,
                     p.highlight ? R"svg( font-weight="bold")svg" : "", p.alert ? R"svg( fill="#b00020")svg" : "", text);
  }
  for (const auto& p : points) {
    s += fmt::format(R"svg(<circle class="point" cx="{:.1f}" cy="{:.1f}" r="{}" fill="{}" stroke="{}"/>)svg", a.px(p.x),
                     a.py(p.y), p.highlight ? 6 : 4, p.highlight ? (p.alert ? "#b00020" : "#1f4e79") : "white",
                     p.alert ? "#b00020" : "#1f4e79");
  }
  return s + "</svg>";
}

}  // namespace vram
