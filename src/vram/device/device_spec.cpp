// Parsing of --device and opening the device it names.
#include "vram/device/device_spec.hpp"

#include <charconv>

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/cuda_device.hpp"
#include "vram/device/sim_device.hpp"

namespace vram {
namespace {

/// "5 ms", "250 us", "1.5 ms": a lag as the device's name shows it.
std::string format_lag(std::int64_t ns) {
  if (ns % 1'000'000 == 0) return fmt::format("{} ms", ns / 1'000'000);
  if (ns >= 1'000'000) return fmt::format("{:g} ms", static_cast<double>(ns) / 1e6);
  if (ns % 1'000 == 0) return fmt::format("{} us", ns / 1'000);
  return fmt::format("{} ns", ns);
}

}  // namespace

device_spec parse_device_spec(std::string_view text) {
  device_spec s;
  s.text = std::string(text);
  const auto colon = text.find(':');
  const std::string_view head = text.substr(0, colon);
  const std::string_view tail = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  auto bad = [&](std::string_view why) {
    return usage_error("bad device '" + std::string(text) + "': " + std::string(why) +
                       " (use auto, sim, sim:CAPACITY such as sim:80GiB, sim:costs=lent, sim:costs=FILE.json, sim:lag=5ms, sim:80GiB,costs=lent,lag=5ms, "
                       "cuda or cuda:N)");
  };
  if (head == "auto") {
    if (colon != std::string_view::npos) throw bad("auto takes no argument");
    s.which = device_spec::kind::automatic;
  } else if (head == "sim") {
    s.which = device_spec::kind::sim;
    if (colon != std::string_view::npos) {
      std::string_view rest = tail;
      for (;;) {
        const auto comma = rest.find(',');
        const std::string_view part = rest.substr(0, comma);
        if (part.empty()) throw bad(tail.empty() ? "nothing after 'sim:'" : "an empty part before, between or after its commas");
        if (part.starts_with("costs=")) {
          const std::string_view model = part.substr(6);
          if (s.lent_costs || !s.costs_file.empty()) throw bad("two cost models");
          if (model == "lent") s.lent_costs = true;
          else if (model.ends_with(".json")) s.costs_file = std::string(model);
          else if (model != "table") throw bad("costs must be table, lent or a cost model FILE.json (vram probe --costs writes one)");
        } else if (part.starts_with("lag=")) {
          if (s.lag_ns) throw bad("two lags");
          try {
            s.lag_ns = parse_duration_ns(part.substr(4));
          } catch (const usage_error& e) {
            throw bad(e.what());
          }
        } else {
          if (s.capacity) throw bad("two capacities");
          try {
            s.capacity = parse_size(part);
          } catch (const usage_error& e) {
            throw bad(e.what());
          }
          if (*s.capacity == 0) throw bad("capacity must be positive");
          if (*s.capacity > sim_device::max_capacity)
            throw bad(fmt::format("a simulated device holds at most {}: {} is more", format_bytes(sim_device::max_capacity),
                                  format_bytes(*s.capacity)));
        }
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + 1);
      }
    }
  } else if (head == "cuda") {
    s.which = device_spec::kind::cuda;
    if (colon != std::string_view::npos) {
      const auto [end, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), s.index);
      if (ec != std::errc{} || end != tail.data() + tail.size() || s.index < 0) throw bad("N must be a device number");
    }
  } else {
    throw bad("unknown kind");
  }
  return s;
}

sim_device_options sim_options(const device_spec& spec) {
  sim_device_options o;
  if (spec.capacity) {
    o.capacity = round_up(*spec.capacity, o.granularity);
    o.label = "simulated device";
  }
  if (spec.lent_costs) {
    o.costs = cost_model::h200_lent();
    o.label += " (lent H200 costs)";
  }
  if (!spec.costs_file.empty()) {
    o.costs = cost_model::read_file(spec.costs_file);
    o.label += " (costs from " + spec.costs_file + ")";
  }
  if (spec.lag_ns && *spec.lag_ns > 0) {
    o.lag_ns = *spec.lag_ns;
    o.label += fmt::format(", {} behind the host", format_lag(*spec.lag_ns));
  }
  return o;
}

device_choice open_device(const device_spec& spec) {
  device_choice c;
  if (spec.which != device_spec::kind::sim) {
    std::string why;
    if (cuda_available(&why)) {
#if VRAM_HAVE_CUDA_H
      cuda_device_options o;
      o.index = spec.index;
      c.dev = std::make_unique<cuda_device>(o);
      c.simulated = false;
      if (spec.which == device_spec::kind::automatic) c.note = "running on " + c.dev->name();
      return c;
#endif
    }
    if (spec.which == device_spec::kind::cuda) {
      throw usage_error("device '" + spec.text + "': CUDA is not available (" + why + "); use --device sim");
    }
    c.dev = std::make_unique<sim_device>(sim_options(spec));
    c.note = "no GPU in use (" + why + "): running on the simulated device (" + c.dev->name() + ")";
    return c;
  }
  c.dev = std::make_unique<sim_device>(sim_options(spec));
  return c;
}

}  // namespace vram
