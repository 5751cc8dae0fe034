// The one exception type the core throws. Apps catch it, log the message and
// exit non-zero; the library itself never aborts or exits.
#pragma once
#include <stdexcept>
#include <string>

namespace nmt {

// An error the user can act on: the message names the file, line and problem
// where there is one ("corpus.de:17: invalid UTF-8 at byte 4").
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// An option value outside its range, or options that contradict each other
// ("--beam-size must be between 1 and 256, got 0"). The apps exit with the
// usage code (2) for it, as for a command line that cannot be parsed.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what) {}
};

// Formats "path:line: message" (or "path: message" when line is 0).
std::string located(const std::string& path, long line, const std::string& message);

}  // namespace nmt
