// UTF-8 validation (RFC 3629) and the whitespace helpers.
#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using nmt::find_invalid_utf8;
constexpr size_t npos = std::string_view::npos;

// Builds a string from raw bytes (NUL-safe).
std::string bytes(std::initializer_list<unsigned> b) {
  std::string s;
  for (unsigned c : b) s.push_back(static_cast<char>(c));
  return s;
}

TEST(Utf8Test, ValidText) {
  EXPECT_EQ(find_invalid_utf8(""), npos);
  EXPECT_EQ(find_invalid_utf8("plain ASCII, with punctuation!\t~"), npos);
  EXPECT_EQ(find_invalid_utf8("Gr\xC3\xBC\xC3\x9F" "e"), npos);                  // 2-byte: ü ß
  EXPECT_EQ(find_invalid_utf8("\xE2\x82\xAC 5"), npos);                          // 3-byte: €
  EXPECT_EQ(find_invalid_utf8("\xF0\x9F\x98\x80"), npos);                        // 4-byte: U+1F600
  EXPECT_EQ(find_invalid_utf8("\xF4\x8F\xBF\xBF"), npos);                        // U+10FFFF, the last code point
  EXPECT_EQ(find_invalid_utf8("\xC2\x80"), npos);                                // U+0080, smallest 2-byte
  EXPECT_EQ(find_invalid_utf8("\xE0\xA0\x80"), npos);                            // U+0800, smallest 3-byte
  EXPECT_EQ(find_invalid_utf8("\xF0\x90\x80\x80"), npos);                        // U+10000, smallest 4-byte
  EXPECT_EQ(find_invalid_utf8("\xED\x9F\xBF"), npos);                            // U+D7FF, just below surrogates
  EXPECT_EQ(find_invalid_utf8("\xEE\x80\x80"), npos);                            // U+E000, just above surrogates
  EXPECT_EQ(find_invalid_utf8(bytes({'a', 0, 'b'})), npos);                      // NUL is valid UTF-8
}

TEST(Utf8Test, TruncatedSequences) {
  EXPECT_EQ(find_invalid_utf8("\xC3"), 0u);
  EXPECT_EQ(find_invalid_utf8("ab\xE2\x82"), 2u);
  EXPECT_EQ(find_invalid_utf8("abc\xF0\x9F\x98"), 3u);
  // A lead byte followed by a non-continuation byte.
  EXPECT_EQ(find_invalid_utf8("x\xC3y"), 1u);
  EXPECT_EQ(find_invalid_utf8("\xE2\x82y"), 0u);
  EXPECT_EQ(find_invalid_utf8("ok \xF0\x9F\x98z"), 3u);
}

TEST(Utf8Test, Overlongs) {
  EXPECT_EQ(find_invalid_utf8("\xC0\x80"), 0u);          // overlong NUL
  EXPECT_EQ(find_invalid_utf8("a\xC1\xBF"), 1u);         // overlong U+007F
  EXPECT_EQ(find_invalid_utf8("\xE0\x80\x80"), 0u);      // overlong 3-byte NUL
  EXPECT_EQ(find_invalid_utf8("ab\xE0\x9F\xBF"), 2u);    // overlong U+07FF
  EXPECT_EQ(find_invalid_utf8("\xF0\x80\x80\x80"), 0u);  // overlong 4-byte NUL
  EXPECT_EQ(find_invalid_utf8("\xF0\x8F\xBF\xBF"), 0u);  // overlong U+FFFF
}

TEST(Utf8Test, Surrogates) {
  EXPECT_EQ(find_invalid_utf8("\xED\xA0\x80"), 0u);        // U+D800
  EXPECT_EQ(find_invalid_utf8("ok\xED\xBF\xBF"), 2u);      // U+DFFF
  EXPECT_EQ(find_invalid_utf8("\xED\xA0\xBD\xED\xB8\x80"), 0u);  // CESU-8 pair
}

TEST(Utf8Test, BeyondUnicode) {
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);    // U+110000
  EXPECT_EQ(find_invalid_utf8("a\xF5\x80\x80\x80"), 1u);   // lead byte F5
  EXPECT_EQ(find_invalid_utf8("\xF8\x88\x80\x80\x80"), 0u);
  EXPECT_EQ(find_invalid_utf8("\xFF"), 0u);
  EXPECT_EQ(find_invalid_utf8("\xFE"), 0u);
}

TEST(Utf8Test, StrayContinuation) {
  EXPECT_EQ(find_invalid_utf8("\x80"), 0u);
  EXPECT_EQ(find_invalid_utf8("abc\xBF"), 3u);
  EXPECT_EQ(find_invalid_utf8("\xC3\xBC\x80"), 2u);  // ü then a stray continuation
}

TEST(Utf8Test, ReportsFirstInvalidOffset) {
  // Valid multibyte text before the error: the offset counts bytes.
  EXPECT_EQ(find_invalid_utf8("\xC3\xBC\xE2\x82\xAC\xF0\x9F\x98\x80\xFFz\xFF"), 9u);
}

TEST(Utf8Test, Length) {
  EXPECT_EQ(nmt::utf8_length(""), 0u);
  EXPECT_EQ(nmt::utf8_length("abc"), 3u);
  EXPECT_EQ(nmt::utf8_length("Gr\xC3\xBC\xC3\x9F" "e"), 5u);
  EXPECT_EQ(nmt::utf8_length("\xE2\x82\xAC"), 1u);
  EXPECT_EQ(nmt::utf8_length("a\xF0\x9F\x98\x80z"), 3u);
}

TEST(Utf8Test, Trim) {
  EXPECT_EQ(nmt::trim("hello\r"), "hello");
  EXPECT_EQ(nmt::trim("hello\r\n"), "hello");
  EXPECT_EQ(nmt::trim("  two words \t"), "two words");
  EXPECT_EQ(nmt::trim("\t\v\f x \n"), "x");
  EXPECT_EQ(nmt::trim("inner  \r  space"), "inner  \r  space");
  EXPECT_EQ(nmt::trim(""), "");
  EXPECT_EQ(nmt::trim(" \r\n\t"), "");
  // Non-ASCII whitespace (U+00A0) is not stripped.
  EXPECT_EQ(nmt::trim("\xC2\xA0x\xC2\xA0"), "\xC2\xA0x\xC2\xA0");
}

TEST(Utf8Test, SplitWs) {
  using V = std::vector<std::string>;
  EXPECT_EQ(nmt::split_ws(""), V{});
  EXPECT_EQ(nmt::split_ws("   \t "), V{});
  EXPECT_EQ(nmt::split_ws("one"), V{"one"});
  EXPECT_EQ(nmt::split_ws("  a  b\tc\r\nd  "), (V{"a", "b", "c", "d"}));
  EXPECT_EQ(nmt::split_ws("gr\xC3\xBC\xC3\x9F" "e welt"), (V{"gr\xC3\xBC\xC3\x9F" "e", "welt"}));
}

}  // namespace
