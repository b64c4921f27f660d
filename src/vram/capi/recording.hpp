#pragma once
// The C API's recording (vram_record_start, VRAM_RECORD): every vram_malloc and vram_free that succeeds, and
// every allocation refused for lack of memory, written as a trace in vram's format, one file per device.
//
// Policy decisions:
//  - While a recording is under way, each vram_malloc / vram_free runs its pool call and writes its event
//    under one mutex, so the file's order is the order the pool saw: a block freed on one thread and handed
//    out again on another is never recorded as allocated before it was freed. Recording thus serializes the
//    program's allocations; without one, the hot path pays one atomic load.
//  - Device 0 records to the path given, device N to the path with ".devN" before its extension, made at the
//    device's first event. Device 0's file is made at the start, so a path that cannot be written is
//    reported by the call that started the recording.
//  - One file, one process: a file another process is recording to (a worker or a subprocess that inherited
//    VRAM_RECORD) is left alone, and this process records to the path with ".pidN" after it, saying so on
//    stderr. A child that fork() made without exec is not recorded: it lets the parent's files go unwritten.
//  - A file that cannot be made or written (a full disk, a file-size limit) stops the recording, not the
//    program: the call being recorded stands, the reason goes to stderr once, and vram_record_stop() (or the
//    message at exit) reports it. A thread writes what is buffered every second, so a process that ends
//    without its exit handlers (killed, os._exit) loses at most its last second, even where it was idle.
//  - A recording is stopped by vram_record_stop() and at exit; after that, calls pass through unrecorded. The
//    object is never freed (a thread may still hold it): every recording started stays in a list that lives
//    as long as the process, one small object each.

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "vram/capi/pool_table.hpp"
#include "vram/trace/trace_recorder.hpp"

namespace vram::capi {

class recording {
 public:
  /// @brief Starts recording to @p path. @throws usage_error for an empty or ".gz" path or one that
  /// cannot be created.
  explicit recording(std::string path);

  /// @brief The pool call of vram_malloc, recorded. @throws as pool_resource::allocate (an out-of-memory
  /// is recorded as an `oom` event first).
  device_ptr allocate(pool_table& table, int device, std::size_t size, stream_id stream);
  /// @brief The pool call of vram_free, recorded when it succeeds.
  void deallocate(pool_table& table, int device, device_ptr p, std::size_t size, stream_id stream);
  /// @brief Flushes and closes every file; later calls pass through. @throws error when a write fails.
  void stop();

  /// @brief In a child process that fork() made: lets the parent's files go unwritten; later calls pass
  /// through. Called with the mutex held (lock()).
  void abandon_in_child() noexcept;
  /// @brief Holds the recording's mutex across a fork(), so the child's copy is whole.
  void lock() { mutex_.lock(); }
  void unlock() { mutex_.unlock(); }

  /// @brief The file device 0 records to: the path asked for, or, where another process records there,
  /// that path with ".pidN" (N this process's id) after it.
  const std::string& path() const noexcept { return path_; }
  /// @brief Device @p device's file: "run.vram" -> "run.dev1.vram" for device 1; @p path itself for 0.
  static std::string device_path(const std::string& path, int device);

 private:
  // Records an event; a file that cannot be made or written stops the recording (fail()), never the call.
  void record(int device, trace_action action, device_ptr p, std::size_t size, stream_id stream) noexcept;
  // The recording stops taking events, says why on stderr, and stop() reports it. Called with the mutex held.
  void fail(const std::exception& e);
  // The flusher thread: writes what is buffered every second, so an idle process killed later loses nothing
  // older than a second.
  void flush_every_second();

  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = true;      // taking events
  bool stopped_ = false;  // stop() called (or a fork child's copy)
  std::string failure_;   // why the recording stopped taking events, if it failed
  std::thread flusher_;
  std::string path_;
  std::chrono::steady_clock::time_point start_;
  std::array<std::unique_ptr<trace_recorder>, max_devices> files_;
};

/// @brief The recording under way, or null. Read on every vram_malloc / vram_free.
extern std::atomic<recording*> active_recording;

/// @brief Starts a recording. @throws usage_error when one is under way or the path is unusable.
void start_recording(const char* path);
/// @brief Stops the recording under way, if any. @throws error when flushing fails.
void stop_recording();

}  // namespace vram::capi
