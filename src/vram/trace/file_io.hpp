#pragma once
// Files in and out for the trace readers and writers, through POSIX calls: an open file read in pieces
// (the readers never hold a whole file they have not checked), and whole files for the writers and tools.
// Every failure is an exception naming the file and the reason.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vram::detail {

/// @brief A file open for reading. @throws input_error "PATH: cannot open: reason" (missing, a folder).
class input_file {
 public:
  explicit input_file(const std::string& path);
  input_file(const input_file&) = delete;
  input_file& operator=(const input_file&) = delete;
  ~input_file();

  /// @brief Reads up to @p len bytes into @p out; fewer only at the end of the file (0 there).
  /// @throws input_error when the read fails.
  std::size_t read(char* out, std::size_t len);
  /// @brief Reads up to @p len bytes at @p offset without moving the read position (the gzip trailer);
  /// returns the bytes read. @throws input_error when the read fails.
  std::size_t read_at(std::uint64_t offset, char* out, std::size_t len);
  /// @brief Appends the rest of the file to @p out. Unbounded for a pipe or a device: not for the readers.
  void read_rest(std::string& out);
  /// @brief The file's size when opened (0 for a pipe or another file of unknown size).
  std::size_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }

 private:
  // Reads until @p len bytes or the end: from the file position when @p offset < 0, else at @p offset.
  std::size_t read_loop(off_t offset, char* out, std::size_t len);

  std::string path_;
  int fd_ = -1;
  std::size_t size_ = 0;
};

/// @brief The whole file's bytes. @throws input_error "PATH: cannot open: reason" for a missing file.
std::string read_file_bytes(const std::string& path);

/// @brief Writes @p bytes to @p path. A plain file of the user's own is replaced only once all are written (through a
/// file beside it, flushed and renamed), so a failure leaves what was there; a link, a device, a file with other
/// names or another user's is written in place. @throws vram::error when the file cannot be written (a file the
/// user may not write is refused).
void write_file_bytes(const std::string& path, std::string_view bytes);

/// @brief Throws what write_file_bytes would say at once, for a command that writes its file only after long
/// work: @throws vram::error "PATH: cannot create: DIR is not a folder this user may write to" where the file does
/// not exist and its folder cannot take it, "PATH: cannot create: REASON" for an existing file the user may not
/// write. Nothing is created or changed.
void check_writable(const std::string& path);

}  // namespace vram::detail
