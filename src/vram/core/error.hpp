#pragma once
// The exceptions vram throws. Each carries a message that a person can act on.

#include <stdexcept>
#include <string>

namespace vram {

/// @brief Base of every error vram throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief An allocation could not be served: the message says what was asked and what the allocator holds.
class out_of_memory : public error {
 public:
  using error::error;
};

/// @brief A caller broke a contract: a free of a pointer never handed out, a double free, a wrong size.
/// The allocator is left unchanged.
class usage_error : public error {
 public:
  using error::error;
};

/// @brief A device (driver) call failed for a reason other than lack of memory.
class device_error : public error {
 public:
  using error::error;
};

/// @brief Malformed input: names the file, the line and the problem.
class input_error : public error {
 public:
  using error::error;
};

/// @brief An internal invariant does not hold (found by a validate()).
class invariant_error : public error {
 public:
  using error::error;
};

}  // namespace vram
