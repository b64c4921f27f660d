// libvram_torch.so: the two functions PyTorch's CUDAPluggableAllocator loads, over libvram.so's C API, for
// when vram's pool serves PyTorch (python/vram/torch.py loads it where it was built).
//
// Why a library of its own: PyTorch turns a NULL from a pluggable allocator into a tensor with a NULL data
// pointer, not an error, and only a C++ exception of its own type (c10::OutOfMemoryError) reaches Python as
// torch.OutOfMemoryError. Throwing one needs PyTorch's headers and libc10, which libvram.so must never need,
// so this file is built only where PyTorch is found (CMake option VRAM_WITH_TORCH) and links to both.
//
// Policy decisions:
//  - An out-of-memory throws c10::OutOfMemoryError with vram's message (what was asked, what is live and
//    reserved, what is free and the largest free range); any other failure throws c10::Error with the message.
//  - A failed free cannot throw (PyTorch frees from deleters that must not): it is written to stderr, and the
//    pool is unchanged, as vram_free leaves it.
#include <c10/util/Exception.h>

#include <cstdio>
#include <string>

#include "vram/vram.h"

extern "C" {

__attribute__((visibility("default"))) void* vram_torch_malloc(ssize_t size, int device, void* stream) {
  void* p = vram_malloc(size, device, stream);
  if (p == nullptr && size > 0) {
    const int code = vram_last_error_code();
    const std::string message = vram_last_error();
    TORCH_CHECK_WITH(OutOfMemoryError, code != VRAM_ERROR_OUT_OF_MEMORY, message);
    TORCH_CHECK(false, message);
  }
  return p;
}

__attribute__((visibility("default"))) void vram_torch_free(void* ptr, ssize_t size, int device, void* stream) {
  vram_free(ptr, size, device, stream);
  if (vram_last_error_code() != VRAM_SUCCESS) std::fprintf(stderr, "vram: %s\n", vram_last_error());
}

}  // extern "C"
