// The policy table and the parsing of policy specs.
#include "vram/policies/registry.hpp"

#include <array>
#include <exception>

#include "vram/core/error.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/emulation/factories.hpp"
#include "vram/pool/pool_resource.hpp"

namespace vram {

namespace detail {

std::string known_policies() {
  std::string s;
  for (const auto& p : policies()) {
    if (!s.empty()) s += ", ";
    s += p.name;
  }
  return s;
}

const policy_info& find_policy(std::string_view name) {
  for (const auto& p : policies())
    if (p.name == name) return p;
  throw usage_error("unknown policy '" + std::string(name) + "'; known policies: " + known_policies());
}

/// @brief @p s without the spaces and tabs at its ends: "vram: max_handle = 16MiB" is "vram:max_handle=16MiB".
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// @brief "k=v;k=v" into options; also PyTorch's own syntax, as PYTORCH_CUDA_ALLOC_CONF writes it:
/// "k:v,k:v". An item's key ends at its first '=' or ':'; a separator inside [...] belongs to the value
/// (PyTorch's roundup_power2_divisions:[256:4,1024:2,>:1]). @throws usage_error for an item with neither.
policy_options parse_options(std::string_view spec, std::string_view text) {
  const auto item_end = [](std::string_view t) {
    int depth = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '[') ++depth;
      else if (t[i] == ']' && depth > 0) --depth;
      else if (depth == 0 && (t[i] == ';' || t[i] == ',')) return i;
    }
    return std::string_view::npos;
  };
  policy_options o;
  while (!text.empty()) {
    const auto end = item_end(text);
    const std::string_view item = trim(text.substr(0, end));
    const auto eq = item.find_first_of("=:");
    if (eq == std::string_view::npos || eq == 0)
      throw usage_error("policy '" + std::string(spec) + "': setting '" + std::string(item) +
                        "' is not key=value (or PyTorch's key:value)");
    o[std::string(trim(item.substr(0, eq)))] = std::string(trim(item.substr(eq + 1)));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return o;
}

/// @brief True when @p name is a policy's name.
bool is_policy(std::string_view name) {
  for (const auto& p : policies())
    if (p.name == name) return true;
  return false;
}

}  // namespace detail

std::span<const policy_info> policies() {
  static const std::array<policy_info, 6> table{{
      {"vram", "vram's pool: physical memory mapped only where blocks sit, recycled anywhere", &make_vram_pool_resource},
      {"cuda-direct", "cudaMalloc / cudaFree for every request, no pool", &make_cuda_direct_resource},
      {"torch-native", "PyTorch's CUDA caching allocator, default settings", &make_torch_native_resource},
      {"torch-expandable", "PyTorch's caching allocator with expandable_segments:True", &make_torch_expandable_resource},
      {"rmm-pool", "RMM pool_memory_resource over cuda_memory_resource", &make_rmm_pool_resource},
      {"cub-bins", "CUB CachingDeviceAllocator, default bins (growth 8)", &make_cub_bins_resource},
  }};
  return table;
}

std::unique_ptr<memory_resource> make_resource(std::string_view spec, device& dev) {
  const auto colon = spec.find(':');
  const policy_info& p = detail::find_policy(detail::trim(spec.substr(0, colon)));
  const policy_options o =
      colon == std::string_view::npos ? policy_options{} : detail::parse_options(spec, spec.substr(colon + 1));
  return p.make(dev, o);
}

void check_policy_settings(const std::vector<std::string>& specs) {
  for (const auto& spec : specs) {
    sim_device dev;
    try {
      (void)make_resource(spec, dev);
    } catch (const usage_error&) {
      throw;  // a bad name or setting: what this check is for
    } catch (const std::exception&) {
      // A good setting this device cannot serve (an initial pool larger than the simulated H200): the
      // command's own device may.
    }
  }
}

std::vector<std::string> parse_policy_list(std::string_view list) {
  std::vector<std::string> out;
  list = detail::trim(list);
  if (list == "all") {
    for (const auto& p : policies()) out.emplace_back(p.name);
    return out;
  }
  while (true) {
    const auto comma = list.find(',');
    const std::string_view spec = detail::trim(list.substr(0, comma));  // "vram, torch-native" names two
    if (spec.empty()) throw usage_error("empty policy name in the policy list; known policies: " + detail::known_policies());
    const std::string_view name = detail::trim(spec.substr(0, spec.find(':')));
    if (!out.empty() && out.back().find(':') != std::string::npos && spec.find(':') != std::string_view::npos &&
        !detail::is_policy(name)) {
      // PyTorch's syntax separates settings with commas too: "torch-native:expandable_segments:True,
      // max_split_size_mb:128" is one policy; the item after the comma belongs to the spec before it.
      out.back() += ',';
      out.back() += spec;
    } else {
      (void)detail::find_policy(name);
      out.emplace_back(spec);
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace vram
