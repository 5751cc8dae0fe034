// The flat JSON object writer of the metrics log and --scores-json.
#include "base/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

TEST(JsonTest, MembersInOrderWithNumbersStringsAndBooleans) {
  const auto s = nmt::JsonObject()
                     .add("type", "valid")
                     .add("step", int64_t{232})
                     .add("loss", 3.99533417)
                     .add("ok", true)
                     .add("small", 1e-12)
                     .str();
  EXPECT_EQ(s, R"({"type":"valid","step":232,"loss":3.99533,"ok":true,"small":1e-12})");
  EXPECT_EQ(nmt::JsonObject().str(), "{}");
  EXPECT_EQ(nmt::JsonObject().add("bleu", 34.912345678, 10).str(), R"({"bleu":34.91234568})");
}

TEST(JsonTest, NonFiniteNumbersAreNull) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(nmt::JsonObject().add("a", nan).add("b", -inf).str(), R"({"a":null,"b":null})");
}

TEST(JsonTest, StringsAreEscaped) {
  EXPECT_EQ(nmt::json_string("plain"), R"("plain")");
  EXPECT_EQ(nmt::json_string("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(nmt::json_string("tab\tnl\ncr\r"), R"("tab\tnl\ncr\r")");
  EXPECT_EQ(nmt::json_string(std::string("\x01\x1f", 2)), R"("\u0001\u001f")");
  EXPECT_EQ(nmt::json_string("Grüße ünd 日本"), "\"Grüße ünd 日本\"");  // UTF-8 is copied
  EXPECT_EQ(nmt::JsonObject().add("k\"ey", "v").str(), R"({"k\"ey":"v"})");
}

}  // namespace
