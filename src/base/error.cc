// The message helpers of error.h: excerpts of what the user gave, bounded
// messages, and "path:line: message" locations of errors in input files.
#include "base/error.h"

#include <cstring>

#include "base/utf8.h"

namespace nmt {

std::string excerpt(std::string_view value) {
  if (value.size() <= kQuotedBytes) return std::string(value);
  return std::string(value.substr(0, utf8_safe_cut(value.substr(0, kQuotedBytes)))) + "... (" +
         std::to_string(value.size()) + " bytes)";
}

std::string bounded_message(std::string message) {
  if (message.size() <= kMessageBytes) return message;
  const std::string_view m(message);
  const size_t head = utf8_safe_cut(m.substr(0, kMessageBytes / 2));
  size_t tail = m.size() - kMessageBytes / 4;
  while (tail < m.size() && (static_cast<unsigned char>(m[tail]) & 0xC0) == 0x80) ++tail;  // a whole character first
  return std::string(m.substr(0, head)) + "... (" + std::to_string(tail - head) + " bytes left out) ..." +
         std::string(m.substr(tail));
}

std::string located(const std::string& path, long line, const std::string& message) {
  if (line > 0) return excerpt(path) + ":" + std::to_string(line) + ": " + message;
  return excerpt(path) + ": " + message;
}

std::string system_error(const std::string& what, int err) { return what + ": " + std::strerror(err); }

}  // namespace nmt
