// The shape check of a config file's text before toml++ parses it
// (ConfigFile::parse, config.cc): chains of dotted key parts bounded.
#pragma once
#include <string>

namespace nmt {

// Refuses TOML that toml++ would turn into very deep tables, before toml++
// sees it: toml++ bounds the nesting of inline values (TOML_MAX_NESTED_VALUES)
// but not the tables that the parts of a table header or dotted key create,
// and frees them recursively, so "[a.a.a....]" with 100,000 parts overflows
// the stack. Scans `text` once in constant memory: strings and comments are
// skipped, runs of bare-key characters and quoted strings joined by '.' are
// counted as one chain; a chain of more than kConfigMaxKeyParts parts, or a
// key (a chain before '=' or inside a table header) with a part longer than
// kConfigMaxKeyBytes, throws nmt::Error "PATH:LINE: ...". Floats and dates
// make chains too ("1.5" has 2 parts) but never long ones; text that is not
// TOML is left to toml++ to report.
void check_shape(const std::string& text, const std::string& path);

}  // namespace nmt
