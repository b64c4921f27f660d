#pragma once
// A plain text table for people: a header row, aligned columns, numbers right-aligned.

#include <string>
#include <vector>

namespace vram {

class text_table {
 public:
  /// @param left_columns how many columns, from the first, hold words (left-aligned); the rest hold numbers.
  explicit text_table(std::vector<std::string> header, std::size_t left_columns = 1)
      : header_(std::move(header)), left_columns_(left_columns) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  /// @brief The table, columns separated by two spaces; the word columns left-aligned, the others right.
  std::string str() const;

 private:
  std::vector<std::string> header_;
  std::size_t left_columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace vram
