// The one exception type the core throws. Apps catch it, log the message and
// exit non-zero; the library itself never aborts or exits.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace nmt {

// What a message quotes of a path or value the user gave: the value itself
// when it is at most kQuotedBytes long, else its first kQuotedBytes bytes
// (whole UTF-8 characters) and "... (N bytes)". Never throws (beyond std::bad_alloc).
constexpr size_t kQuotedBytes = 200;
std::string excerpt(std::string_view value);

// `message` when it is at most kMessageBytes long, else its head and tail
// around "... (N bytes left out) ...": no message, whatever it quotes,
// grows with the input. Never throws (beyond std::bad_alloc).
constexpr size_t kMessageBytes = 1024;
std::string bounded_message(std::string message);

// An error the user can act on: the message names the file, line and problem
// where there is one ("corpus.de:17: invalid UTF-8 at byte 4"). Every
// message is bounded (bounded_message()): a 10 MB option value or path
// never comes back whole.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(bounded_message(what)) {}
};

// An option value outside its range, or options that contradict each other
// ("--beam-size must be between 1 and 256, got 0"). The apps exit with the
// usage code (2) for it, as for a command line that cannot be parsed.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what) {}
};

// Formats "path:line: message" (or "path: message" when line is 0), the
// path as excerpt() quotes it.
std::string located(const std::string& path, long line, const std::string& message);

// Formats "what: <strerror(err)>" ("cannot open: No such file or directory")
// for a failed system call whose errno was `err`. Never throws (beyond std::bad_alloc).
std::string system_error(const std::string& what, int err);

}  // namespace nmt
