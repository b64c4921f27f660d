#pragma once
// A progress line on standard error for long work, shown only when standard error is a terminal, so
// logs and pipes stay clean.

#include <cstdio>
#include <string>
#include <unistd.h>

namespace vram::cli {

class progress_line {
 public:
  progress_line() : enabled_(isatty(fileno(stderr)) != 0) {}
  ~progress_line() { clear(); }
  void show(const std::string& text) {
    if (!enabled_) return;
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (enabled_ && shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  bool enabled_;
  bool shown_ = false;
};

}  // namespace vram::cli
