// A writer for one flat JSON object, for the metrics log (metrics.jsonl) and
// nmt-translate --scores-json: keys in the order added, strings escaped,
// numbers with 6 significant digits (or as given precision), NaN and Inf as
// null (JSON has no such numbers).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace nmt {

class JsonObject {
 public:
  // Each add() appends one "key": value member and returns *this. Never throws
  // (beyond std::bad_alloc).
  JsonObject& add(std::string_view key, std::string_view value);
  JsonObject& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  JsonObject& add(std::string_view key, double value, int precision = 6);
  JsonObject& add(std::string_view key, int64_t value);
  JsonObject& add(std::string_view key, int value) { return add(key, static_cast<int64_t>(value)); }
  JsonObject& add(std::string_view key, bool value);
  // The object, e.g. {"type":"valid","step":232}, without a newline.
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(std::string_view k);
  std::string body_;
};

// `text` as a JSON string literal with its quotes: '"' '\\' and control
// characters escaped; other bytes (UTF-8 included) are copied.
std::string json_string(std::string_view text);

}  // namespace nmt
