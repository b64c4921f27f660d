#pragma once
// The CUDA driver, opened at run time. vram links nothing from CUDA: the first use dlopens libcuda.so.1,
// finds cuGetProcAddress_v2 with dlsym, and asks it for every other function at the ABI version whose
// signature the table below spells out (so a newer driver or header can never hand us a function of
// another shape: e.g. CUDA 13 gives "cuCtxSynchronize" a context argument, and we ask for the 2.0 one).
// The table is filled once per process (thread-safe) and never unloaded.
//
// The public part (cuda_available) needs no CUDA header; the table needs cuda.h and exists only in builds
// that found it (VRAM_HAVE_CUDA_H=1, see CMakeLists.txt).

#include <string>

namespace vram {

/// @brief True when this build of vram has the CUDA device (cuda.h was found at build time).
constexpr bool cuda_built() noexcept {
#if VRAM_HAVE_CUDA_H
  return true;
#else
  return false;
#endif
}

/// @brief True when a CUDA device can be used now: the driver loads, cuInit succeeds and it counts at least
/// one device. Otherwise false, with the reason in @p why (when given), e.g. "libcuda.so.1 not found (...)",
/// "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)". Cheap after the first call.
bool cuda_available(std::string* why = nullptr);

/// @brief The number of CUDA devices the driver counts (cuDeviceGetCount), or 0 with the reason in @p why.
int cuda_device_count(std::string* why = nullptr);

}  // namespace vram

#if VRAM_HAVE_CUDA_H
#include <cuda.h>

namespace vram::detail {

// The functions vram uses: member, driver symbol, the CUDA version of the ABI requested, the parameters
// (all return CUresult). The version is the one in which the signature written here was introduced
// (cudaTypedefs.h names each signature PFN_<symbol>_v<version>); all are at most 11.2, so any driver that
// has cuGetProcAddress_v2 (CUDA 12.0 and later) serves them. The memsets, copies, module and launch calls
// serve the tests alone: they write and check a pattern in every block an allocator hands out, with small
// kernels loaded from PTX text at run time (tests/support/gpu_pattern.hpp), so no CUDA compiler is needed
// to build. The streams and the stream-ordered allocator (cuMemAllocAsync and the memory pool calls) serve
// `vram bench` alone, which measures cudaMallocAsync beside vram's pool.
#define VRAM_CUDA_DRIVER_FUNCTIONS(X)                                                                           \
  X(init, "cuInit", 2000, unsigned int)                                                                         \
  X(driver_get_version, "cuDriverGetVersion", 2020, int*)                                                       \
  X(device_get, "cuDeviceGet", 2000, CUdevice*, int)                                                            \
  X(device_get_count, "cuDeviceGetCount", 2000, int*)                                                           \
  X(device_get_name, "cuDeviceGetName", 2000, char*, int, CUdevice)                                             \
  X(device_get_attribute, "cuDeviceGetAttribute", 2000, int*, CUdevice_attribute, CUdevice)                     \
  X(device_total_mem, "cuDeviceTotalMem", 3020, size_t*, CUdevice)                                              \
  X(primary_ctx_retain, "cuDevicePrimaryCtxRetain", 7000, CUcontext*, CUdevice)                                 \
  X(primary_ctx_release, "cuDevicePrimaryCtxRelease", 11000, CUdevice)                                          \
  X(ctx_get_current, "cuCtxGetCurrent", 4000, CUcontext*)                                                       \
  X(ctx_set_current, "cuCtxSetCurrent", 4000, CUcontext)                                                        \
  X(ctx_synchronize, "cuCtxSynchronize", 2000, void)                                                            \
  X(mem_get_info, "cuMemGetInfo", 3020, size_t*, size_t*)                                                       \
  X(mem_alloc, "cuMemAlloc", 3020, CUdeviceptr*, size_t)                                                        \
  X(mem_free, "cuMemFree", 3020, CUdeviceptr)                                                                   \
  X(mem_address_reserve, "cuMemAddressReserve", 10020, CUdeviceptr*, size_t, size_t, CUdeviceptr,               \
    unsigned long long)                                                                                         \
  X(mem_address_free, "cuMemAddressFree", 10020, CUdeviceptr, size_t)                                           \
  X(mem_create, "cuMemCreate", 10020, CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,        \
    unsigned long long)                                                                                         \
  X(mem_release, "cuMemRelease", 10020, CUmemGenericAllocationHandle)                                           \
  X(mem_map, "cuMemMap", 10020, CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)  \
  X(mem_unmap, "cuMemUnmap", 10020, CUdeviceptr, size_t)                                                        \
  X(mem_set_access, "cuMemSetAccess", 10020, CUdeviceptr, size_t, const CUmemAccessDesc*, size_t)               \
  X(mem_get_allocation_granularity, "cuMemGetAllocationGranularity", 10020, size_t*, const CUmemAllocationProp*, \
    CUmemAllocationGranularity_flags)                                                                           \
  X(event_create, "cuEventCreate", 2000, CUevent*, unsigned int)                                                \
  X(event_destroy, "cuEventDestroy", 4000, CUevent)                                                             \
  X(event_record, "cuEventRecord", 2000, CUevent, CUstream)                                                     \
  X(event_query, "cuEventQuery", 2000, CUevent)                                                                 \
  X(event_synchronize, "cuEventSynchronize", 2000, CUevent)                                                     \
  X(stream_synchronize, "cuStreamSynchronize", 2000, CUstream)                                                  \
  X(stream_wait_event, "cuStreamWaitEvent", 3020, CUstream, CUevent, unsigned int)                              \
  X(stream_create, "cuStreamCreate", 2000, CUstream*, unsigned int)                                             \
  X(stream_destroy, "cuStreamDestroy", 4000, CUstream)                                                          \
  X(device_get_default_mem_pool, "cuDeviceGetDefaultMemPool", 11020, CUmemoryPool*, CUdevice)                   \
  X(mem_pool_get_attribute, "cuMemPoolGetAttribute", 11020, CUmemoryPool, CUmemPool_attribute, void*)           \
  X(mem_pool_set_attribute, "cuMemPoolSetAttribute", 11020, CUmemoryPool, CUmemPool_attribute, void*)           \
  X(mem_pool_trim_to, "cuMemPoolTrimTo", 11020, CUmemoryPool, size_t)                                           \
  X(mem_alloc_async, "cuMemAllocAsync", 11020, CUdeviceptr*, size_t, CUstream)                                  \
  X(mem_free_async, "cuMemFreeAsync", 11020, CUdeviceptr, CUstream)                                             \
  X(memset_d8, "cuMemsetD8", 3020, CUdeviceptr, unsigned char, size_t)                                         \
  X(memcpy_dtoh, "cuMemcpyDtoH", 3020, void*, CUdeviceptr, size_t)                                              \
  X(memcpy_dtoh_async, "cuMemcpyDtoHAsync", 3020, void*, CUdeviceptr, size_t, CUstream)                         \
  X(memset_d32, "cuMemsetD32", 3020, CUdeviceptr, unsigned int, size_t)                                         \
  X(memset_d32_async, "cuMemsetD32Async", 3020, CUdeviceptr, unsigned int, size_t, CUstream)                    \
  X(module_load_data_ex, "cuModuleLoadDataEx", 2010, CUmodule*, const void*, unsigned int, CUjit_option*,       \
    void**)                                                                                                     \
  X(module_unload, "cuModuleUnload", 2000, CUmodule)                                                            \
  X(module_get_function, "cuModuleGetFunction", 2000, CUfunction*, CUmodule, const char*)                       \
  X(launch_kernel, "cuLaunchKernel", 4000, CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,  \
    unsigned int, unsigned int, unsigned int, CUstream, void**, void**)                                         \
  X(get_error_name, "cuGetErrorName", 6000, CUresult, const char**)                                             \
  X(get_error_string, "cuGetErrorString", 6000, CUresult, const char**)

/// @brief The driver's functions, resolved once. Every pointer is non-null in a table that loaded.
struct cuda_api {
#define VRAM_CUDA_MEMBER(member, symbol, version, ...) CUresult (*member)(__VA_ARGS__) = nullptr;
  VRAM_CUDA_DRIVER_FUNCTIONS(VRAM_CUDA_MEMBER)
#undef VRAM_CUDA_MEMBER
};

/// @brief The table, loaded and cuInit'ed on first use; nullptr when that failed, with the reason in @p why.
/// Does not require a device (cuda_available() does).
const cuda_api* load_cuda_api(std::string* why);

/// @brief "CUDA_ERROR_INVALID_VALUE (invalid argument)" for a result, through the driver's own names.
std::string cuda_error_text(const cuda_api& api, CUresult r);

}  // namespace vram::detail
#endif  // VRAM_HAVE_CUDA_H
