// The C API (include/vram/vram.h): each function checks its arguments, calls the device's pool from the
// pool table, and turns every C++ exception into a status code and this thread's last error message.
//
// Policy decisions:
//  - Nothing crosses the C boundary: every function body runs inside guarded(), which catches all.
//  - The status of the latest call is one thread-local int (0 after a success, so a success costs one store);
//    the message of the latest failure stays in a fixed thread-local buffer until the next failure. The
//    buffer needs no destructor at thread exit and no allocation to clear.
//  - A message reads "<the call with its arguments>: <what went wrong>", e.g.
//    "vram_malloc(size=134217728, device=0, stream=0x0): vram: out of memory allocating 128.00 MiB ...".
//  - Exceptions map to codes by kind: out_of_memory -> OUT_OF_MEMORY; usage_error and input_error ->
//    INVALID_ARGUMENT; device_error -> DEVICE; anything else (invariant_error, std::bad_alloc of host
//    memory, ...) -> INTERNAL.
//  - The hot path (vram_malloc / vram_free) is a range check, an atomic load of the pool, and the pool's call.
#include "vram/vram.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "vram/capi/pool_table.hpp"
#include "vram/core/error.hpp"

namespace vram::capi {

namespace detail {

/// This thread's status: the latest call's code and the latest failure's message.
struct thread_status {
  int code = 0;
  char message[2048] = {};
};
thread_local thread_status current;

/// Writes what fmt formats into [out, out + cap), clipped; returns the characters written.
template <class... Args>
std::size_t put(char* out, std::size_t cap, fmt::format_string<Args...> format, Args&&... args) {
  const auto r = fmt::format_to_n(out, cap, format, std::forward<Args>(args)...);
  return std::min(static_cast<std::size_t>(r.size), cap);
}

/// Records a failure: @p describe writes the call into the buffer, then ": " and @p what follow.
template <class Describe>
int fail(status code, const Describe& describe, std::string_view what) noexcept {
  thread_status& s = current;
  s.code = static_cast<int>(code);
  constexpr std::size_t cap = sizeof s.message - 1;
  std::size_t n = 0;
  try {
    n = describe(s.message, cap);
    n += put(s.message + n, cap - n, ": {}", what);
  } catch (...) {
    n = put(s.message, cap, "{}", what);  // cannot throw for a string_view; kept for safety
  }
  s.message[n] = '\0';
  return s.code;
}

/// Runs @p body; returns 0, or the code of the exception it threw (recorded with @p describe).
template <class Describe, class Body>
int guarded(const Describe& describe, Body&& body) noexcept {
  try {
    body();
    current.code = static_cast<int>(status::success);
    return 0;
  } catch (const out_of_memory& e) {
    return fail(status::out_of_memory, describe, e.what());
  } catch (const usage_error& e) {
    return fail(status::invalid_argument, describe, e.what());
  } catch (const input_error& e) {
    return fail(status::invalid_argument, describe, e.what());
  } catch (const device_error& e) {
    return fail(status::device, describe, e.what());
  } catch (const std::bad_alloc&) {
    return fail(status::internal, describe, "host memory ran out (std::bad_alloc)");
  } catch (const std::exception& e) {
    return fail(status::internal, describe, e.what());
  } catch (...) {
    return fail(status::internal, describe, "an unknown exception");
  }
}

stream_id to_stream(void* stream) noexcept { return static_cast<stream_id>(reinterpret_cast<std::uintptr_t>(stream)); }
device_ptr to_device_ptr(void* p) noexcept { return static_cast<device_ptr>(reinterpret_cast<std::uintptr_t>(p)); }

/// A describe for calls that take only a device index: "vram_trim(device=1)".
auto call_on(const char* function, int device) {
  return [function, device](char* out, std::size_t cap) { return put(out, cap, "{}(device={})", function, device); };
}

void check_size(ssize_t size) {
  if (size < 0) throw usage_error(fmt::format("size {} is negative; sizes are bytes, 0 or more", size));
}

template <class T>
void check_output(T* out, const char* what) {
  if (out == nullptr) throw usage_error(fmt::format("{} is NULL; pass where to store the answer", what));
}

}  // namespace detail

}  // namespace vram::capi

using vram::capi::pool_table;
using namespace vram::capi::detail;

extern "C" {

void* vram_malloc(ssize_t size, int device, void* stream) {
  void* result = nullptr;
  guarded(
      [&](char* out, std::size_t cap) {
        return put(out, cap, "vram_malloc(size={}, device={}, stream={})", size, device, stream);
      },
      [&] {
        check_size(size);
        pool_table& table = pool_table::global();
        if (size == 0) {
          table.check_index(device);  // as cudaMalloc(0): NULL, and no error
          return;
        }
        const vram::device_ptr p = table.pool(device).allocate(static_cast<std::size_t>(size), to_stream(stream));
        result = reinterpret_cast<void*>(static_cast<std::uintptr_t>(p));
      });
  return result;
}

void vram_free(void* ptr, ssize_t size, int device, void* stream) {
  guarded(
      [&](char* out, std::size_t cap) {
        return put(out, cap, "vram_free(ptr={}, size={}, device={}, stream={})", ptr, size, device, stream);
      },
      [&] {
        if (ptr == nullptr) return;
        check_size(size);
        pool_table::global().pool(device).deallocate(to_device_ptr(ptr), static_cast<std::size_t>(size),
                                                     to_stream(stream));
      });
}

int vram_record_stream(void* ptr, int device, void* stream) {
  return guarded(
      [&](char* out, std::size_t cap) {
        return put(out, cap, "vram_record_stream(ptr={}, device={}, stream={})", ptr, device, stream);
      },
      [&] {
        if (ptr == nullptr) throw vram::usage_error("the pointer is NULL; pass a live block from vram_malloc");
        pool_table::global().pool(device).record_stream(to_device_ptr(ptr), to_stream(stream));
      });
}

int vram_trim(int device, size_t* released) {
  return guarded(call_on("vram_trim", device), [&] {
    const std::size_t bytes = pool_table::global().pool(device).trim();
    if (released != nullptr) *released = bytes;
  });
}

int vram_set_limit(int device, size_t bytes) {
  return guarded(
      [&](char* out, std::size_t cap) { return put(out, cap, "vram_set_limit(device={}, bytes={})", device, bytes); },
      [&] { pool_table::global().pool(device).set_limit(bytes); });
}

int vram_get_limit(int device, size_t* bytes) {
  return guarded(call_on("vram_get_limit", device), [&] {
    check_output(bytes, "bytes");
    *bytes = pool_table::global().pool(device).limit();
  });
}

int vram_get_stats(int device, vram_stats* out) {
  return guarded(call_on("vram_get_stats", device), [&] {
    check_output(out, "out");
    const vram::pool_stats s = pool_table::global().pool(device).stats();
    vram_stats c{};
    c.requested_bytes = s.requested_bytes;
    c.allocated_bytes = s.allocated_bytes;
    c.peak_allocated_bytes = s.peak_allocated_bytes;
    c.reserved_bytes = s.reserved_bytes;
    c.peak_reserved_bytes = s.peak_reserved_bytes;
    c.cached_bytes = s.cached_bytes;
    c.thread_cached_bytes = s.thread_cached_bytes;
    c.pending_bytes = s.pending_bytes;
    c.mapped_bytes = s.mapped_bytes;
    c.allocations = s.allocations;
    c.frees = s.frees;
    c.failed_allocations = s.failed_allocations;
    *out = c;
  });
}

char* vram_snapshot_json(int device) {
  char* result = nullptr;
  guarded(call_on("vram_snapshot_json", device), [&] {
    const std::string text = pool_table::global().pool(device).snapshot().dump();
    char* copy = static_cast<char*>(std::malloc(text.size() + 1));
    if (copy == nullptr) throw std::bad_alloc();
    std::memcpy(copy, text.c_str(), text.size() + 1);
    result = copy;
  });
  return result;
}

void vram_free_string(char* text) {
  std::free(text);
  current.code = static_cast<int>(vram::capi::status::success);
}

int vram_device_count(void) {
  int count = -1;
  guarded([](char* out, std::size_t cap) { return put(out, cap, "vram_device_count()"); },
          [&] { count = pool_table::global().device_count(); });
  return count;
}

const char* vram_device_name(int device) {
  const char* name = nullptr;
  guarded(call_on("vram_device_name", device), [&] { name = pool_table::global().device_name(device).c_str(); });
  return name;
}

int vram_last_error_code(void) { return current.code; }

const char* vram_last_error(void) { return current.message; }

}  // extern "C"
