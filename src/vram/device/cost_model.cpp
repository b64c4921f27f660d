// The modelled cost of driver calls. Design:
//  - a curve is a few measured (size, ns) points; between them the cost is linear in log2(size), beyond
//    them it is held at the nearest end (a 64 B cudaMalloc costs what a 256 B one did);
//  - the H200 table: cudaMalloc and cudaFree (idle device) by size; the virtual memory calls per handle,
//    by handle size, taking the middle of each measured range (shared/traces/README.md);
//  - the event, stream and cuMemGetInfo calls were not measured: flat assumed costs, named in docs/device.md.
#include "vram/device/cost_model.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "vram/core/error.hpp"

namespace vram {

cost_curve::cost_curve(std::vector<std::pair<std::size_t, double>> points) {
  given_ = points;
  points_.reserve(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto [bytes, ns] = points[i];
    if (bytes == 0 || ns < 0.0) {
      throw usage_error(fmt::format("cost_curve: point {} has size {} and cost {} ns; sizes must be > 0 and "
                                    "costs >= 0", i, bytes, ns));
    }
    if (i > 0 && bytes <= points[i - 1].first) {
      throw usage_error(fmt::format("cost_curve: sizes must ascend, but point {} ({} bytes) follows {} bytes", i,
                                    bytes, points[i - 1].first));
    }
    points_.emplace_back(std::log2(static_cast<double>(bytes)), ns);
  }
}

std::uint64_t cost_curve::at(std::size_t bytes) const noexcept {
  if (points_.empty()) return 0;
  // Costs are >= 0, so adding 0.5 and truncating rounds to the nearest nanosecond (cheaper than llround).
  auto nearest = [](double ns) { return static_cast<std::uint64_t>(ns + 0.5); };
  const double x = bytes == 0 ? points_.front().first : std::log2(static_cast<double>(bytes));
  if (x <= points_.front().first) return nearest(points_.front().second);
  if (x >= points_.back().first) return nearest(points_.back().second);
  std::size_t i = 1;
  while (points_[i].first < x) ++i;  // points_[i - 1].first < x <= points_[i].first
  const auto [x0, y0] = points_[i - 1];
  const auto [x1, y1] = points_[i];
  return nearest(y0 + (x - x0) / (x1 - x0) * (y1 - y0));
}

cost_curve cost_curve::scaled(double factor) const {
  if (!(factor >= 0.0)) throw usage_error(fmt::format("cost_curve: factor {} must be >= 0", factor));
  cost_curve c;
  c.given_ = given_;
  c.points_ = points_;
  for (auto& p : c.given_) p.second *= factor;
  for (auto& p : c.points_) p.second *= factor;
  return c;
}

namespace detail {

// One curve from costs in microseconds at the given sizes.
cost_curve curve_us(std::initializer_list<std::size_t> sizes, std::initializer_list<double> us) {
  std::vector<std::pair<std::size_t, double>> points;
  auto s = sizes.begin();
  for (auto u = us.begin(); u != us.end() && s != sizes.end(); ++u, ++s) points.emplace_back(*s, *u * 1000.0);
  return cost_curve(std::move(points));
}

cost_curve flat_us(double us) { return cost_curve({{1, us * 1000.0}}); }

}  // namespace detail

cost_model cost_model::h200() {
  using detail::curve_us;
  using detail::flat_us;
  // cudaMalloc / cudaFree were timed at these sizes.
  const auto legacy = {256 * std::size_t{1}, 4 * KiB, 64 * KiB, 1 * MiB, 2 * MiB, 8 * MiB, 64 * MiB, 256 * MiB, 1 * GiB};
  // The virtual memory calls were timed on one handle (or one reservation) of each of these sizes.
  const auto handles = {2 * MiB, 8 * MiB, 32 * MiB, 128 * MiB, 512 * MiB, 1 * GiB};

  cost_model m;
  auto set = [&m](device_call c, cost_curve curve) { m.curves[static_cast<std::size_t>(c)] = std::move(curve); };
  set(device_call::legacy_malloc, curve_us(legacy, {42.1, 41.7, 42.5, 43.3, 42.3, 41.4, 47.2, 54.9, 177.3}));
  set(device_call::legacy_free, curve_us(legacy, {35.5, 35.6, 36.1, 36.7, 36.3, 39.1, 71.5, 170.8, 579.3}));
  // Middles of the measured ranges: 7-10 -> 8.5, 19-25 -> 22, and so on.
  set(device_call::mem_create, curve_us(handles, {8.5, 9.0, 12.5, 8.0, 12.5, 17.5}));
  set(device_call::address_reserve, curve_us(handles, {0.5, 0.65, 3.0, 1.7, 1.8, 2.25}));
  set(device_call::mem_map, curve_us(handles, {0.7, 0.7, 0.95, 0.6, 0.65, 0.8}));
  set(device_call::set_access, curve_us(handles, {22.0, 22.0, 38.0, 33.0, 45.0, 57.5}));
  set(device_call::mem_unmap, curve_us(handles, {15.0, 15.0, 23.0, 20.0, 24.5, 29.0}));
  set(device_call::mem_release, curve_us(handles, {10.5, 14.0, 25.5, 39.5, 136.5, 272.0}));
  set(device_call::address_free, curve_us(handles, {0.5, 0.6, 2.4, 1.55, 1.7, 2.15}));
  // Not measured: assumptions (docs/device.md).
  set(device_call::event_record, flat_us(2.0));
  set(device_call::event_query, flat_us(0.5));
  set(device_call::stream_wait_event, flat_us(2.0));  // a queued command, as cuEventRecord
  set(device_call::event_synchronize, flat_us(1.0));
  set(device_call::stream_synchronize, flat_us(1.0));
  set(device_call::device_synchronize, flat_us(5.0));
  set(device_call::mem_get_info, flat_us(1.0));
  return m;
}

cost_model cost_model::h200_lent() {
  // bench/calibrate.py docs/results/h200-2026-12-04-calibration --fit: measured over modelled time of each
  // kind over 15 replays (five traces under vram, torch-native and torch-expandable). Kinds those replays
  // did not make (frees, releases, syncs) keep the table's figures.
  cost_model m = h200();
  auto scale = [&m](device_call c, double f) {
    auto& curve = m.curves[static_cast<std::size_t>(c)];
    curve = curve.scaled(f);
  };
  scale(device_call::legacy_malloc, 1.51);
  scale(device_call::mem_create, 1.56);
  scale(device_call::mem_map, 1.85);
  scale(device_call::set_access, 1.24);
  scale(device_call::mem_unmap, 1.68);
  scale(device_call::address_reserve, 8.29);  // one call a replay
  scale(device_call::event_record, 0.99);
  scale(device_call::event_query, 3.11);
  return m;
}

cost_model cost_model::zero() { return cost_model{}; }

nlohmann::json cost_model::to_json() const {
  nlohmann::json curves = nlohmann::json::object();
  for (std::size_t k = 0; k < device_call_kinds; ++k) {
    const auto& points = this->curves[k].points();
    if (points.empty()) continue;
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [bytes, ns] : points) list.push_back({bytes, ns});
    curves[std::string(to_string(static_cast<device_call>(k)))] = std::move(list);
  }
  return {{"curves", std::move(curves)}};
}

cost_model cost_model::from_json(const nlohmann::json& j, const cost_model& base, std::string_view where) {
  auto bad = [&](const std::string& why) { return input_error(fmt::format("{}: {}", where, why)); };
  if (!j.is_object() || !j.contains("curves") || !j.at("curves").is_object()) {
    throw bad("not a cost model: expected an object with \"curves\": {KIND: [[bytes, ns], ...]}");
  }
  cost_model m = base;
  for (const auto& [name, list] : j.at("curves").items()) {
    std::size_t k = 0;
    while (k < device_call_kinds && to_string(static_cast<device_call>(k)) != name) ++k;
    if (k == device_call_kinds) throw bad(fmt::format("unknown call kind \"{}\"", name));
    if (!list.is_array() || list.empty()) throw bad(fmt::format("{}: expected a non-empty list of [bytes, ns]", name));
    std::vector<std::pair<std::size_t, double>> points;
    for (const auto& p : list) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_unsigned() || !p[1].is_number()) {
        throw bad(fmt::format("{}: point {} is not [bytes, ns] with bytes a whole number", name, p.dump()));
      }
      points.emplace_back(p[0].get<std::size_t>(), p[1].get<double>());
    }
    try {
      m.curves[k] = cost_curve(std::move(points));
    } catch (const usage_error& e) {
      throw bad(fmt::format("{}: {}", name, e.what()));
    }
  }
  return m;
}

cost_model cost_model::read_file(const std::string& path) {
  if (std::error_code ec; std::filesystem::is_directory(path, ec))
    throw input_error(fmt::format("{}: cannot open the cost model: it is a folder", path));
  std::ifstream in(path);
  if (!in) throw input_error(fmt::format("{}: cannot open the cost model: {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw input_error(fmt::format("{}: not JSON: {}", path, e.what()));
  }
  return from_json(j, h200(), path);
}

}  // namespace vram
