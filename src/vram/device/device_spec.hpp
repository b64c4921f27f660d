#pragma once
// What `--device` accepts: "auto", "sim", "sim:CAPACITY" (e.g. sim:80GiB), "sim:costs=MODEL" and
// "sim:CAPACITY,costs=MODEL" (MODEL: table, the shared H200 figures, the default; lent, the H200 lent to the
// project, cost_model::h200_lent; or the path of a cost model file ending in .json, as `vram probe --costs`
// writes), "sim:lag=DURATION" (the device runs that far behind the host, e.g. lag=5ms:
// sim_device_options::lag_ns), each part after "sim:" in any order, comma-separated; "cuda", "cuda:N".

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "vram/device/device.hpp"
#include "vram/device/sim_device.hpp"

namespace vram {

struct device_spec {
  enum class kind { automatic, sim, cuda } which = kind::automatic;
  std::optional<std::size_t> capacity;  // sim only
  bool lent_costs = false;               // sim only: cost_model::h200_lent() rather than h200()
  std::string costs_file;                // sim only: a cost model file (cost_model::read_file) rather than h200()
  std::optional<std::int64_t> lag_ns;    // sim only: how far the device runs behind the host
  int index = 0;                        // cuda only
  std::string text;                     // as written
};

/// @brief Parses a device spec. @throws usage_error naming the text and the accepted forms.
device_spec parse_device_spec(std::string_view text);

/// @brief The simulated device's options for a spec (default: an H200).
sim_device_options sim_options(const device_spec& spec);

/// @brief A device and, where the choice was not the one asked for literally, a line saying what was chosen.
struct device_choice {
  std::unique_ptr<device> dev;
  std::string note;
  bool simulated = true;
};

/// @brief Opens the device a spec names. @throws usage_error where it cannot be had (e.g. cuda without a GPU).
device_choice open_device(const device_spec& spec);

}  // namespace vram
