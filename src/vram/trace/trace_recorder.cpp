// trace_recorder: a vram-format trace appended as events come, valid after every flush.
#include "vram/trace/trace_recorder.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "vram/core/error.hpp"
#include "vram/trace/trace_io.hpp"

namespace vram {

namespace {

/// Writes all of @p bytes at @p offset (or at the file's end when @p offset is negative).
void write_all(int fd, std::string_view bytes, off_t offset, const std::string& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = offset < 0 ? ::write(fd, bytes.data() + done, bytes.size() - done)
                                 : ::pwrite(fd, bytes.data() + done, bytes.size() - done,
                                            offset + static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw error(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
    }
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

trace_recorder::trace_recorder(std::string path, std::size_t buffer_bytes, std::int64_t flush_interval_us)
    : path_(std::move(path)),
      buffer_bytes_(std::max<std::size_t>(buffer_bytes, 64)),
      flush_interval_us_(flush_interval_us) {
  // Opened without truncating, and cut only once the lock is held: a second process asking for the same
  // file leaves the first's recording whole.
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw error(fmt::format("{}: cannot create: {}", path_, std::strerror(errno)));
  buffer_.reserve(buffer_bytes_ + 64);
  try {
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) throw recording_busy(fmt::format("{}: another process is recording to it", path_));
      // A file system without locks (some network ones): recorded unlocked.
    }
    if (::ftruncate(fd_, 0) != 0) throw error(fmt::format("{}: cannot create: {}", path_, std::strerror(errno)));
    write_all(fd_, detail::vram_header(0, 0, 0), 0, path_);
    if (::lseek(fd_, static_cast<off_t>(detail::vram_header_size), SEEK_SET) < 0)
      throw error(fmt::format("{}: cannot seek: {}", path_, std::strerror(errno)));
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

trace_recorder::~trace_recorder() {
  try {
    flush();
  } catch (...) {  // nothing to tell from a destructor; flush() first to see the failure
  }
  ::close(fd_);
}

void trace_recorder::record(trace_event e) {
  e.time_us = std::max(e.time_us, last_time_us_);
  last_time_us_ = e.time_us;
  encoder_.append(e, buffer_);
  ++count_;
  if (buffer_.size() >= buffer_bytes_ || e.time_us - flushed_at_us_ >= flush_interval_us_) flush();
}

void trace_recorder::abandon() noexcept {
  ::close(fd_);
  fd_ = -1;
  written_count_ = count_;  // nothing left for flush() or the destructor to write
  buffer_.clear();
}

void trace_recorder::flush() {
  if (written_count_ == count_ || fd_ < 0) return;
  try {
    write_all(fd_, buffer_, -1, path_);
  } catch (const error&) {
    // Part of the buffer may be in the file past the payload the header names: cut it off, so the file is
    // the trace of the last flush that succeeded, and its end is where the next write goes.
    const auto whole = static_cast<off_t>(detail::vram_header_size + payload_size_);
    if (::ftruncate(fd_, whole) == 0) ::lseek(fd_, whole, SEEK_SET);
    throw;
  }
  payload_size_ += buffer_.size();
  payload_crc_ = detail::crc32_extend(payload_crc_, buffer_);
  written_count_ = count_;
  flushed_at_us_ = last_time_us_;
  buffer_.clear();
  write_all(fd_, detail::vram_header(written_count_, payload_size_, payload_crc_), 0, path_);
}

std::string recording_name_problem(std::string_view path) {
  const bool gz = detail::ends_with_any_case(path, ".gz");
  if (!gz && format_for_name(path) == trace_format::vram) return {};
  return fmt::format("{}: a recording is written in vram's format, uncompressed, as it runs; name a .vram file, and "
                     "{} it afterwards", path, gz ? "compress" : "convert");
}

std::string process_recording_path(const std::string& path, long pid) { return fmt::format("{}.pid{}", path, pid); }

std::string device_recording_path(const std::string& path, int device) {
  if (device == 0) return path;
  const std::size_t slash = path.find_last_of('/');
  const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
  const std::size_t dot = path.find('.', base + 1);  // the first extension, not a leading dot of the name
  if (dot == std::string::npos) return fmt::format("{}.dev{}", path, device);
  return fmt::format("{}.dev{}{}", path.substr(0, dot), device, path.substr(dot));
}

}  // namespace vram
