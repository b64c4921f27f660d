#pragma once
// Writes a trace in vram's format (docs/trace-format.md) to a file as events come, for a program that records
// its own allocations (VRAM_RECORD, vram_record_start). The file is a valid trace after every flush: the
// payload is appended, then the 40-byte header is written again with the new event count, payload size and
// CRC-32, so a program that dies between flushes leaves a trace of everything up to the last flush.
//
// Policy decisions:
//  - Events are encoded into a buffer at once (a few bytes each) and written when the buffer reaches its
//    size, when an event comes a second (flush_interval_us) or more after the last write, at flush() and at
//    destruction; one write() for the payload and one pwrite() for the header. An owner that also calls
//    flush() every second (the C API's recording does, from a thread of its own) leaves a program that ends
//    without its exit handlers (Python's os._exit, a crash) short of at most its last second of events.
//  - Not thread-safe: its owner serializes calls (the C API's recording holds a mutex).
//  - Times must not go backwards (the format stores deltas): a time before the previous event's is taken as
//    the previous event's.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "vram/core/error.hpp"
#include "vram/trace/trace.hpp"
#include "vram/trace/vram_format.hpp"

namespace vram {

/// @brief The file a recording asked for is being recorded to by another process (it holds the file's lock).
class recording_busy : public error {
 public:
  using error::error;
};

/// @brief Appends events to a vram-format trace file, keeping the file valid after each flush.
class trace_recorder {
 public:
  /// @brief Creates (or truncates) @p path and writes the header of an empty trace. The file is locked
  /// (flock) while it is recorded to, so that two processes never write one file: the second is refused
  /// before it truncates anything.
  /// @throws recording_busy when another recorder holds the file; error "PATH: cannot create: reason" when
  /// the file cannot be made.
  explicit trace_recorder(std::string path, std::size_t buffer_bytes = std::size_t{1} << 20,
                          std::int64_t flush_interval_us = 1'000'000);
  /// @brief Flushes; a failure here is lost (call flush() first to see it).
  ~trace_recorder();
  trace_recorder(const trace_recorder&) = delete;
  trace_recorder& operator=(const trace_recorder&) = delete;

  /// @brief Adds @p e; writes the buffer out when it is full. @throws error when writing fails.
  void record(trace_event e);
  /// @brief Writes the buffered events and the updated header. @throws error when writing fails; the file
  /// is then cut back to the trace of the last flush that succeeded, so it stays valid.
  void flush();
  /// @brief In a child process that fork() made: the file is the parent's, so the child lets it go without
  /// writing anything (the parent flushes its own events); later calls do nothing. Only calls that are
  /// safe in a forked child of a threaded program.
  void abandon() noexcept;

  const std::string& path() const noexcept { return path_; }
  /// @brief Events recorded so far (flushed or not).
  std::uint64_t events() const noexcept { return count_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::size_t buffer_bytes_;
  std::int64_t flush_interval_us_;
  std::int64_t flushed_at_us_ = 0;  // the time of the last event written out
  std::string buffer_;
  detail::vram_encoder encoder_;
  std::int64_t last_time_us_ = 0;
  std::uint64_t count_ = 0;          // events recorded
  std::uint64_t written_count_ = 0;  // of them, in the file
  std::uint64_t payload_size_ = 0;   // payload bytes in the file
  std::uint32_t payload_crc_ = 0;
};

/// @brief The file of device @p device in a recording asked for as @p path: @p path itself for device 0,
/// "run.dev1.vram" for device 1 of "run.vram" (before the first extension; "run.dev1" without one).
std::string device_recording_path(const std::string& path, int device);

/// @brief The file of process @p pid in a recording asked for as @p path, where another process records to
/// @p path itself (a process a program started, or one that found the file taken): "run.vram.pid4242".
std::string process_recording_path(const std::string& path, long pid);

/// @brief Why @p path cannot name a recording, or "" when it can: a recording is written in vram's format,
/// uncompressed, as it runs, so a name that asks for CSV (".csv") or gzip (".gz", in any case) would mislead
/// every reader of it. The message ends in what to do instead.
std::string recording_name_problem(std::string_view path);

}  // namespace vram
