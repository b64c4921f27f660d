#pragma once
// Static SVG charts, for the parts of `vram report` that need no interaction (the trade-off scatter) and for
// the memory chart of a build without the chart library: axes with round ticks, lines, labelled points.

#include <cmath>
#include <string>
#include <vector>

namespace vram {

struct svg_line {
  std::string name;
  std::string colour;     // any SVG colour, e.g. "#1f77b4"
  std::vector<double> y;  // one value per x
};

struct svg_point {
  double x = 0, y = 0;
  std::string label;       // '\n' between lines
  bool highlight = false;  // drawn larger and filled
  bool alert = false;      // drawn in red: a setting under which allocations failed
};

struct svg_frame {
  std::string x_label, y_label;
  int width = 900, height = 320;
  /// The y axis starts no lower than this unless a point lies below it (reserved / live: 1).
  double y_floor = -HUGE_VAL;
};

/// @brief Lines over shared x values (ascending), with a legend.
std::string svg_line_chart(const std::vector<double>& x, const std::vector<svg_line>& lines, const svg_frame& frame);
/// @brief Points with their labels beside them: to the right of a point, or to its left near the right edge,
/// moved up or down (with a line to the point) where they would cover a label already placed.
std::string svg_scatter(const std::vector<svg_point>& points, const svg_frame& frame);

/// @brief About @p count round tick values covering [lo, hi] (1, 2 or 5 times a power of ten apart).
std::vector<double> nice_ticks(double lo, double hi, int count = 5);

}  // namespace vram
