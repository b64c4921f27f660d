// The C API (include/vram/vram.h): each function checks its arguments, calls the device's pool from the
// pool table, and turns every C++ exception into a status code and this thread's last error message.
//
// Policy decisions:
//  - Nothing crosses the C boundary: every function body runs inside guarded(), which catches all.
//  - The status of the latest call is one thread-local int (0 after a success, so a success costs one store);
//    the message of the latest failure stays in a thread's buffer of 2 KiB, made at its first failure, until
//    the next failure.
//  - A message reads "<the call with its arguments>: <what went wrong>", e.g.
//    "vram_malloc(size=134217728, device=0, stream=0x0): vram: out of memory allocating 128.00 MiB ...".
//  - Exceptions map to codes by kind: out_of_memory -> OUT_OF_MEMORY; usage_error and input_error ->
//    INVALID_ARGUMENT; device_error -> DEVICE; anything else (invariant_error, std::bad_alloc of host
//    memory, ...) -> INTERNAL.
//  - The hot path (vram_malloc / vram_free) is a range check, an atomic load of the pool, an atomic load of
//    the recording (null unless one is under way: recording.hpp), and the pool's call.
//  - The library keeps no thread-local state that forces static TLS: it is loaded with dlopen (PyTorch,
//    ctypes), where glibc has only a small surplus for such a block (docs/c-api.md, "Loading").
#include "vram/vram.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "vram/capi/pool_table.hpp"
#include "vram/capi/recording.hpp"
#include "vram/core/error.hpp"

namespace vram::capi {

namespace detail {

/// Room for a failure's message, the terminating NUL included.
constexpr std::size_t message_capacity = 2048;

/// This thread's status: the latest call's code (written by every call, so a plain int), and the latest
/// failure's message, on the heap from the thread's first failure. The thread-local block stays a few
/// dozen bytes, which glibc can place in its static surplus even when the library comes by dlopen.
constinit thread_local int current_code = 0;
thread_local std::unique_ptr<char[]> current_message;

/// Writes what fmt formats into [out, out + cap), clipped; returns the characters written.
template <class... Args>
std::size_t put(char* out, std::size_t cap, fmt::format_string<Args...> format, Args&&... args) {
  const auto r = fmt::format_to_n(out, cap, format, std::forward<Args>(args)...);
  return std::min(static_cast<std::size_t>(r.size), cap);
}

/// Records a failure: @p describe writes the call into the buffer, then ": " and @p what follow.
template <class Describe>
int fail(status code, const Describe& describe, std::string_view what) noexcept {
  current_code = static_cast<int>(code);
  if (!current_message) {
    current_message.reset(new (std::nothrow) char[message_capacity]);
    if (!current_message) return current_code;  // no host memory for the message: the code still tells
  }
  char* message = current_message.get();
  constexpr std::size_t cap = message_capacity - 1;
  std::size_t n = 0;
  try {
    n = describe(message, cap);
    n += put(message + n, cap - n, ": {}", what);
  } catch (...) {
    n = put(message, cap, "{}", what);  // cannot throw for a string_view; kept for safety
  }
  message[n] = '\0';
  return current_code;
}

/// Runs @p body; returns 0, or the code of the exception it threw (recorded with @p describe).
template <class Describe, class Body>
int guarded(const Describe& describe, Body&& body) noexcept {
  try {
    body();
    current_code = static_cast<int>(status::success);
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

/// The C structure of a device pool's figures, from its pool_stats.
vram_stats stats_of(int device) {
  const pool_stats s = pool_table::global().pool(device).stats();
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
  c.alloc_retries = s.arena.out_of_memory_recoveries;
  c.handles_created = s.arena.handles_created;
  c.handles_released = s.arena.handles_released;
  c.maps = s.arena.handles_mapped;
  c.unmaps = s.arena.handles_unmapped;
  return c;
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
        const auto bytes = static_cast<std::size_t>(size);
        vram::capi::recording* r = vram::capi::active_recording.load(std::memory_order_acquire);
        const vram::device_ptr p = r == nullptr ? table.pool(device).allocate(bytes, to_stream(stream))
                                                : r->allocate(table, device, bytes, to_stream(stream));
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
        pool_table& table = pool_table::global();
        if (vram::capi::recording* r = vram::capi::active_recording.load(std::memory_order_acquire)) [[unlikely]]
          r->deallocate(table, device, to_device_ptr(ptr), static_cast<std::size_t>(size), to_stream(stream));
        else
          table.pool(device).deallocate(to_device_ptr(ptr), static_cast<std::size_t>(size), to_stream(stream));
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
    *out = stats_of(device);
  });
}

int vram_get_stats_sized(int device, void* out, size_t size) {
  return guarded(
      [&](char* msg, std::size_t cap) {
        return put(msg, cap, "vram_get_stats_sized(device={}, size={})", device, size);
      },
      [&] {
        check_output(out, "out");
        if (size < 8) throw vram::usage_error(fmt::format("size is {}: at least 8, the size of one field", size));
        const vram_stats c = stats_of(device);
        const std::size_t n = std::min(size, sizeof c);
        std::memcpy(out, &c, n);
        if (size > n) std::memset(static_cast<char*>(out) + n, 0, size - n);
      });
}

int vram_reset_peak_stats(int device) {
  return guarded(call_on("vram_reset_peak_stats", device), [&] { pool_table::global().pool(device).reset_peak_stats(); });
}

int vram_record_start(const char* path) {
  return guarded(
      [&](char* out, std::size_t cap) { return put(out, cap, "vram_record_start(path={})", path ? path : "NULL"); },
      [&] { vram::capi::start_recording(path); });
}

int vram_record_stop(void) {
  return guarded([](char* out, std::size_t cap) { return put(out, cap, "vram_record_stop()"); },
                 [] { vram::capi::stop_recording(); });
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
  current_code = static_cast<int>(vram::capi::status::success);
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

int vram_last_error_code(void) { return current_code; }

const char* vram_last_error(void) { return current_message ? current_message.get() : ""; }

}  // extern "C"

namespace {
// VRAM_RECORD=path starts a recording when the library is loaded; a path that cannot be written is said on
// stderr (no call has a status to carry it yet) and the program runs unrecorded.
const bool recording_from_environment = [] {
  const char* path = std::getenv("VRAM_RECORD");
  if (path != nullptr && *path != '\0' && vram_record_start(path) != 0)
    std::fprintf(stderr, "vram: VRAM_RECORD: %s\n", vram_last_error());
  return true;
}();
}  // namespace
