#pragma once
// A plain text table for people: a header row, aligned columns, numbers right-aligned.

#include <string>
#include <vector>

namespace vram {

class text_table {
 public:
  explicit text_table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  /// @brief The table, columns separated by two spaces; the first column left-aligned, the others right.
  std::string str() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace vram
