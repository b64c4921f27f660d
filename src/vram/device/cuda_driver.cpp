// Loading the CUDA driver at run time (see cuda_driver.hpp).
// Decisions:
//  - dlopen("libcuda.so.1") with RTLD_NOW | RTLD_LOCAL: the soname the driver package installs (the
//    unversioned libcuda.so is a development link that a machine with only the driver lacks).
//  - cuGetProcAddress_v2 is the one symbol taken with dlsym; every other function comes from it, at the
//    ABI version written in the table, with CU_GET_PROC_ADDRESS_LEGACY_STREAM (stream 0 is the legacy
//    default stream, as everywhere in vram).
//  - Loading happens once (std::call_once); its outcome, success or the reason for failure, is kept for the
//    life of the process, and the library is never closed (contexts and allocations may outlive any object).
//  - cuInit(0) is part of loading: no other call works before it.
#include "vram/device/cuda_driver.hpp"

#if VRAM_HAVE_CUDA_H
#include <dlfcn.h>

#include <mutex>

#include <fmt/format.h>
#endif

namespace vram {

#if VRAM_HAVE_CUDA_H
namespace detail {
namespace {

using get_proc_address_fn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

struct loaded_driver {
  cuda_api api;
  bool ok = false;
  std::string why;  // when !ok
};

/// @brief The name a result has without the driver's help (for failures before cuGetErrorName is known).
std::string bare_error_name(CUresult r) {
  switch (r) {
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
    default: return fmt::format("CUresult {}", static_cast<int>(r));
  }
}

std::string resolve_all(get_proc_address_fn get, cuda_api& api) {
  auto one = [&](const char* symbol, int version, void** slot) -> std::string {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    const CUresult r = get(symbol, slot, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
    if (r == CUDA_ERROR_STUB_LIBRARY)
      return "libcuda.so.1 is the CUDA toolkit's stub (CUDA_ERROR_STUB_LIBRARY), not the driver's: a library path "
             "(LD_LIBRARY_PATH, ld.so.conf) names the toolkit's lib64/stubs before the driver";
    if (r != CUDA_SUCCESS) return fmt::format("cuGetProcAddress({}, {}) failed: {}", symbol, version, bare_error_name(r));
    if (*slot == nullptr || status != CU_GET_PROC_ADDRESS_SUCCESS) {
      const char* what = status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "not available at that version"
                                                                               : "not found";
      return fmt::format("the driver lacks {} (ABI of CUDA {}.{}): {}", symbol, version / 1000, version % 1000 / 10, what);
    }
    return {};
  };
#define VRAM_CUDA_RESOLVE(member, symbol, version, ...)                                 \
  {                                                                                     \
    void* fn = nullptr;                                                                 \
    if (auto e = one(symbol, version, &fn); !e.empty()) return e;                       \
    api.member = reinterpret_cast<decltype(api.member)>(fn);                            \
  }
  VRAM_CUDA_DRIVER_FUNCTIONS(VRAM_CUDA_RESOLVE)
#undef VRAM_CUDA_RESOLVE
  return {};
}

loaded_driver load() {
  loaded_driver d;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    const std::string text = e != nullptr ? e : "dlopen failed";
    d.why = text.find("No such file") != std::string::npos ? "libcuda.so.1 not found"
                                                           : "libcuda.so.1 could not be loaded: " + text;
    return d;
  }
  dlerror();
  auto get = reinterpret_cast<get_proc_address_fn>(dlsym(lib, "cuGetProcAddress_v2"));
  if (get == nullptr) {
    d.why = "libcuda.so.1 has no cuGetProcAddress_v2: the driver is older than CUDA 12.0";
    return d;
  }
  if (auto e = resolve_all(get, d.api); !e.empty()) {
    d.why = e;
    return d;
  }
  if (const CUresult r = d.api.init(0); r != CUDA_SUCCESS) {
    d.why = "cuInit failed: " + cuda_error_text(d.api, r);
    return d;
  }
  d.ok = true;
  return d;
}

const loaded_driver& driver() {
  static std::once_flag once;
  static loaded_driver d;
  std::call_once(once, [] { d = load(); });
  return d;
}

}  // namespace

const cuda_api* load_cuda_api(std::string* why) {
  const auto& d = driver();
  if (!d.ok) {
    if (why != nullptr) *why = d.why;
    return nullptr;
  }
  return &d.api;
}

std::string cuda_error_text(const cuda_api& api, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.get_error_name == nullptr || api.get_error_name(r, &name) != CUDA_SUCCESS || name == nullptr) {
    return bare_error_name(r);
  }
  if (api.get_error_string == nullptr || api.get_error_string(r, &text) != CUDA_SUCCESS || text == nullptr) {
    return name;
  }
  return fmt::format("{} ({})", name, text);
}

}  // namespace detail

bool cuda_available(std::string* why) {
  const detail::cuda_api* api = detail::load_cuda_api(why);
  if (api == nullptr) return false;
  int count = 0;
  if (const CUresult r = api->device_get_count(&count); r != CUDA_SUCCESS) {
    if (why != nullptr) *why = "cuDeviceGetCount failed: " + detail::cuda_error_text(*api, r);
    return false;
  }
  if (count <= 0) {
    if (why != nullptr) *why = "the driver loaded but counts no CUDA device";
    return false;
  }
  return true;
}

int cuda_device_count(std::string* why) {
  if (!cuda_available(why)) return 0;
  const detail::cuda_api* api = detail::load_cuda_api(why);
  int count = 0;
  if (api == nullptr || api->device_get_count(&count) != CUDA_SUCCESS) return 0;  // cuda_available said why
  return count;
}

#else  // no cuda.h at build time

bool cuda_available(std::string* why) {
  if (why != nullptr) *why = "this build of vram has no CUDA device (cuda.h was not found when it was built)";
  return false;
}

int cuda_device_count(std::string* why) {
  cuda_available(why);
  return 0;
}

#endif

}  // namespace vram
