#pragma once
// Modelled time of each driver call, from the figures measured on an H200 (shared/traces/README.md):
// cudaMalloc / cudaFree by size, and the virtual memory API per handle by handle size. Between measured
// sizes the cost is interpolated linearly in log2(size); beyond them it is held at the nearest end.
// Event and stream calls were not measured; their costs are assumptions, named as such in docs/device.md.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "vram/device/device.hpp"

namespace vram {

/// @brief A cost curve: (size in bytes, cost in ns) points, sizes ascending.
class cost_curve {
 public:
  cost_curve() = default;
  explicit cost_curve(std::vector<std::pair<std::size_t, double>> points);
  /// @brief Modelled nanoseconds for one call on @p bytes.
  std::uint64_t at(std::size_t bytes) const noexcept;
  /// @brief The same curve with every cost multiplied by @p factor (>= 0).
  cost_curve scaled(double factor) const;
  /// @brief The curve's points as given: (size in bytes, cost in ns), sizes ascending.
  const std::vector<std::pair<std::size_t, double>>& points() const noexcept { return given_; }

 private:
  std::vector<std::pair<std::size_t, double>> given_;  // (size, ns)
  std::vector<std::pair<double, double>> points_;      // (log2 size, ns)
};

/// @brief Per-kind cost curves. For the virtual memory calls the size is the handle's size, and a call over
/// a range costs the sum over the handles it touches (the H200 figures follow handles, not bytes).
struct cost_model {
  std::array<cost_curve, device_call_kinds> curves;

  std::uint64_t cost(device_call c, std::size_t bytes) const noexcept {
    return curves[static_cast<std::size_t>(c)].at(bytes);
  }
  /// @brief The H200 figures (driver 580, CUDA 13.0): the shared table's, the default.
  static cost_model h200();
  /// @brief The H200 lent to the project, measured on 2026-12-04 (driver 580.159.04): the table's curves,
  /// each call kind's scaled by the factor bench/calibrate.py --fit found from replays measured there
  /// (docs/device.md). Within 20% of the measured driver time of every replay measured, including when
  /// each trace is left out of the fit.
  static cost_model h200_lent();
  /// @brief Every call free: for tests that count calls only.
  static cost_model zero();

  /// @brief The model as JSON: {"curves": {KIND: [[bytes, ns], ...], ...}}, every kind with a curve.
  nlohmann::json to_json() const;
  /// @brief A model from to_json()'s form (extra keys beside "curves" are ignored). Kinds the object leaves out
  /// keep @p base's curves. @throws input_error naming @p where and what is wrong: not an object, an unknown
  /// kind, a point that is not [bytes, ns], sizes not ascending, a cost below 0.
  static cost_model from_json(const nlohmann::json& j, const cost_model& base, std::string_view where);
  /// @brief from_json() of a file, over the shared table (h200()). @throws input_error naming the file.
  static cost_model read_file(const std::string& path);
};

}  // namespace vram
