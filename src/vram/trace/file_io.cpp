// POSIX file input and output for traces. Design decisions:
//  - read(2) into caller buffers, never mmap: a file truncated while mapped would raise SIGBUS, and a
//    reader must never crash on its input;
//  - EINTR is retried; a folder given as a trace is refused at open with a plain message;
//  - the size is known only for a regular file; a pipe or a device (/dev/zero) reports 0, and the readers
//    then bound what they hold by what they have checked, never by a size they were told.

#include "vram/trace/file_io.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "vram/core/error.hpp"

namespace vram::detail {

input_file::input_file(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw input_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw input_error(fmt::format("{}: cannot stat: {}", path, std::strerror(err)));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd_);
    throw input_error(fmt::format("{}: is a directory, not a trace file", path));
  }
  size_ = S_ISREG(st.st_mode) ? static_cast<std::size_t>(st.st_size) : 0;
}

input_file::~input_file() { ::close(fd_); }

std::size_t input_file::read(char* out, std::size_t len) { return read_loop(-1, out, len); }

std::size_t input_file::read_at(std::uint64_t offset, char* out, std::size_t len) {
  return read_loop(static_cast<off_t>(offset), out, len);
}

std::size_t input_file::read_loop(off_t offset, char* out, std::size_t len) {
  std::size_t done = 0;
  while (done < len) {
    const ssize_t n = offset < 0 ? ::read(fd_, out + done, len - done)
                                 : ::pread(fd_, out + done, len - done, offset + static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw input_error(fmt::format("{}: cannot read: {}", path_, std::strerror(errno)));
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

void input_file::read_rest(std::string& out) {
  std::size_t have = out.size();
  out.resize(std::max(have + (1 << 16), size_ + 1));  // one spare byte: a short read marks the end
  for (;;) {
    have += read(out.data() + have, out.size() - have);
    if (have < out.size()) break;
    out.resize(out.size() * 2);
  }
  out.resize(have);
}

std::string read_file_bytes(const std::string& path) {
  input_file file(path);
  std::string out;
  file.read_rest(out);
  return out;
}

namespace {

// The process's umask, read from /proc (umask(2) can only be read by setting it, which would race with other
// threads creating files); 022 where /proc does not say.
mode_t process_umask() {
  try {
    const std::string status = read_file_bytes("/proc/self/status");
    const auto at = status.find("\nUmask:");
    if (at != std::string::npos) return static_cast<mode_t>(std::strtoul(status.c_str() + at + 7, nullptr, 8));
  } catch (const std::exception&) {
  }
  return 022;
}

// Writes all of @p bytes to @p fd; @p fail(what, errno) must throw.
template <class Fail>
void write_all(int fd, std::string_view bytes, Fail&& fail) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", errno);
    }
    done += static_cast<std::size_t>(n);
  }
}

// Opens @p path as it is (truncated; through a link, created where it points) and writes @p bytes into it.
void write_in_place(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw error(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
  write_all(fd, bytes, [&](const char* what, int err) {
    ::close(fd);
    throw error(fmt::format("{}: {}: {}", path, what, std::strerror(err)));
  });
  if (::close(fd) != 0) throw error(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
}

}  // namespace

void write_file_bytes(const std::string& path, std::string_view bytes) {
  struct stat was {};
  const bool exists = ::lstat(path.c_str(), &was) == 0;
  // A file the user may not write is refused, as a shell's redirection would refuse it.
  if (exists && S_ISREG(was.st_mode) && ::access(path.c_str(), W_OK) != 0)
    throw error(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
  // Written in place, as it is: anything but a plain file of the user's own with one name (a link, a device, a
  // pipe, a file with other names, another user's file), which a new file would not be the same as.
  if (exists && (!S_ISREG(was.st_mode) || was.st_nlink > 1 || was.st_uid != ::geteuid()))
    return write_in_place(path, bytes);
  // Otherwise into a new file beside it, flushed to the disk and renamed over it once whole, so a write that
  // fails (a full disk, a file size limit, a crash) leaves the file that was there, and no part of the new one.
  // Where no file can be made beside it (a folder the user may not write to, a name too long for a suffix) or
  // renamed over it (a file mounted on its own), it is written in place.
  std::string tmp = path + ".XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return write_in_place(path, bytes);
  auto abandon = [&](const char* what, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw error(fmt::format("{}: {}: {}", path, what, std::strerror(err)));
  };
  // mkostemp makes the file 0600: give it the mode and group of the file it replaces, else those of any new file.
  if (::fchmod(fd, exists ? (was.st_mode & 07777) : (0666 & ~process_umask())) != 0) abandon("cannot create", errno);
  if (exists && was.st_gid != ::getegid() && ::fchown(fd, static_cast<uid_t>(-1), was.st_gid) != 0) {
    // Not a member of that group: the new file keeps the user's own, as any file the user makes.
  }
  write_all(fd, bytes, abandon);
  if (::fsync(fd) != 0 && errno != EINVAL) abandon("cannot write", errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) abandon("cannot write", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    if (err == EPERM || err == EACCES || err == EBUSY || err == EXDEV) return write_in_place(path, bytes);
    throw error(fmt::format("{}: cannot write: {}", path, std::strerror(err)));
  }
}

void check_writable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw error(fmt::format("{}: cannot create: it is a folder", path));
    if (::access(path.c_str(), W_OK) != 0)
      throw error(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
    return;
  }
  auto folder_of = [](const std::string& p) {
    const auto slash = p.find_last_of('/');
    return slash == std::string::npos ? std::string(".") : slash == 0 ? std::string("/") : p.substr(0, slash);
  };
  // A link to a file that does not exist yet: the file is made where the link points, so that folder must
  // take it (the link's own folder may well).
  std::string made_at = path;
  struct stat ls {};
  if (::lstat(path.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode)) {
    std::string target(PATH_MAX, '\0');
    const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
    if (n > 0) {
      target.resize(static_cast<std::size_t>(n));
      made_at = target.front() == '/' ? target : folder_of(path) + "/" + target;
    }
  }
  const std::string dir = folder_of(made_at);
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode) || ::access(dir.c_str(), W_OK | X_OK) != 0)
    throw error(made_at == path
                    ? fmt::format("{}: cannot create: {} is not a folder this user may write to", path, dir)
                    : fmt::format("{}: cannot create: it links to {}, and {} is not a folder this user may write to",
                                  path, made_at, dir));
}

}  // namespace vram::detail
