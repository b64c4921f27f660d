// `vram info [--device D] [--json]`: what the device is and what it holds: name, compute capability, total
// and free memory, the virtual memory granularity, the driver's CUDA version, and the bytes this process's
// vram objects hold (the driver cannot say what one process uses, so this is the device's own bookkeeping:
// for the simulated device its used bytes). On the simulated device every figure is modelled, and it says so.
#include <fmt/format.h>

#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "vram/cli/commands.hpp"
#include "vram/core/size.hpp"
#include "vram/device/cuda_device.hpp"
#include "vram/device/device_spec.hpp"
#include "vram/device/sim_device.hpp"

namespace vram::cli {

namespace {

struct info_args {
  std::string device = "auto";
  bool json = false;
};

struct device_facts {
  std::string name;
  bool simulated = true;
  std::optional<std::pair<int, int>> compute_capability;
  std::optional<int> driver_version;  // 1000 * major + 10 * minor
  memory_info memory;
  std::size_t granularity = 0;
  std::size_t held = 0;
};

device_facts facts_of(device& dev) {
  device_facts f;
  f.name = dev.name();
  f.simulated = dev.simulated();
  f.memory = dev.mem_info();
  f.granularity = dev.granularity();
  if (const auto* sim = dynamic_cast<const sim_device*>(&dev)) f.held = sim->used_bytes();
#if VRAM_HAVE_CUDA_H
  if (const auto* gpu = dynamic_cast<const cuda_device*>(&dev)) {
    f.name = gpu->gpu_name();
    f.compute_capability = gpu->compute_capability();
    f.driver_version = gpu->driver_version();
    f.held = gpu->held_bytes();
  }
#endif
  return f;
}

std::string bytes_text(std::size_t b) { return fmt::format("{} ({} bytes)", format_bytes(b), b); }

void run_info(const info_args& a) {
  const auto spec = parse_device_spec(a.device);
  const device_choice choice = open_device(spec);
  const device_facts f = facts_of(*choice.dev);
  if (a.json) {
    nlohmann::json j = {{"device", choice.dev->name()},
                        {"name", f.name},
                        {"simulated", f.simulated},
                        {"total_bytes", f.memory.total},
                        {"free_bytes", f.memory.free},
                        {"used_bytes", f.memory.total - f.memory.free},
                        {"granularity_bytes", f.granularity},
                        {"held_bytes", f.held},
                        {"note", choice.note}};
    j["compute_capability"] = f.compute_capability
                                  ? nlohmann::json(fmt::format("{}.{}", f.compute_capability->first, f.compute_capability->second))
                                  : nlohmann::json(nullptr);
    j["driver_version"] = f.driver_version ? nlohmann::json(*f.driver_version) : nlohmann::json(nullptr);
    std::cout << j.dump(2) << '\n';
    return;
  }
  if (!choice.note.empty()) std::cerr << choice.note << '\n';
  auto line = [](std::string_view key, const std::string& value) { std::cout << fmt::format("{:<20}{}\n", key, value); };
  line("device", choice.dev->name());
  if (f.name != choice.dev->name()) line("name", f.name);
  line("compute capability", f.compute_capability
                                 ? fmt::format("{}.{}", f.compute_capability->first, f.compute_capability->second)
                                 : "- (simulated)");
  line("total memory", bytes_text(f.memory.total));
  line("free memory", bytes_text(f.memory.free));
  line("used memory", bytes_text(f.memory.total - f.memory.free) + " (every process)");
  line("granularity", bytes_text(f.granularity));
  line("driver", f.driver_version ? fmt::format("CUDA {}.{} ({})", *f.driver_version / 1000, *f.driver_version % 1000 / 10,
                                                *f.driver_version)
                                  : "- (simulated)");
  line("held by vram", bytes_text(f.held) + " (this process's vram objects on this device)");
  if (f.simulated) {
    std::cout << "\nThis is the simulated device: its figures are modelled (docs/device.md), no GPU memory is in use.\n";
  }
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto a = std::make_shared<info_args>();
  auto* cmd = app.add_subcommand("info", "Show the device: name, capability, memory, granularity, driver");
  cmd->add_option("--device,-d", a->device, device_help)->capture_default_str();
  cmd->add_flag("--json", a->json, "Print a JSON object");
  cmd->callback([a] { run_info(*a); });
}

}  // namespace vram::cli
