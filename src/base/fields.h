// How an options struct names its fields once. Each struct has
//   template <class S, class V> static void fields(S& self, V&& visit);
// which calls visit(Field{...}, self.member) for every field, in the order
// --help lists them. That one list drives the command-line flags (apps/cli.h),
// the key=value text stored in checkpoints (ModelOptions), lookup by name and
// config files, so a new option is declared, documented and read in one
// place; a numeric field declares its allowed range there too
// (Field{...}.at_least(1), checked by check_ranges() in check_ranges.h).
// Enum options list their names once, in an EnumNames specialization.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/validate.h"

namespace nmt {

// What Field::flags can say.
enum FieldFlag : unsigned {
  kInternal = 1,         // not a command-line option (filled by the program)
  kMayBeAbsent = 2,      // stored configs written before this field existed lack it: the default applies
  kMultiple = 4,         // may be repeated (a list)
  kPath = 8,             // a file or folder: a run's config.toml stores it absolute (make_paths_absolute)
};

// The long names (Field::name) of the options a user set, on the command
// line or in a config file. The few defaults that depend on whether another
// option was set read it (StreamOptions::resolved(), ServeOptions::resolved(),
// AlignRunOptions::resolved(), the validate() of translation's option structs,
// the trainer's resume checks); empty through the library: nothing was given.
using GivenOptions = std::set<std::string>;

// Whether an end of a field's range belongs to it (Field::within).
using End = check::End;

// One field as users see it.
struct Field {
  const char* name;                  // long option "--NAME"; stored with '_' for '-' (checkpoints)
  const char* help;                  // one line of --help
  const char* group = "";            // its section in --help ("" : the general one)
  const char* short_name = nullptr;  // e.g. "-o"
  unsigned flags = 0;                // FieldFlag bits
  const char* old_name = nullptr;    // a former spelling, still accepted on the command line with a warning
  // A numeric field's allowed values, checked by check_ranges() (none: any,
  // or a rule of validate() between several options).
  std::optional<check::Range> range = std::nullopt;
  bool has(FieldFlag f) const { return (flags & f) != 0; }

  // This field allowing lo or more (a floating-point one: finite numbers >= lo).
  Field at_least(double lo) const { return ranged({lo}); }
  // This floating-point field allowing finite numbers > lo.
  Field above(double lo) const { return ranged({lo, check::kNoLimit, End::kOpen}); }
  // This field allowing lo to hi, each end closed unless said open (floating-point fields only).
  Field within(double lo, double hi, End lo_end = End::kClosed, End hi_end = End::kClosed) const {
    return ranged({lo, hi, lo_end, hi_end});
  }

 private:
  // A copy of this field that allows `r`.
  Field ranged(const check::Range& r) const {
    Field f = *this;
    f.range = r;
    return f;
  }
};

// NAME with '_' for each '-' ("emb-dim" -> "emb_dim"), the form stored in checkpoints.
inline std::string underscored(const char* name) {
  std::string s(name);
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

// Each enum option specializes this with
//   static constexpr const char* what = "attention";   // for messages
//   static constexpr std::array<std::pair<E, const char*>, N> values = {...};
template <class E>
struct EnumNames;

// The name of `e`, or "?" for a value outside the list.
template <class E>
const char* enum_name(E e) {
  for (const auto& [v, name] : EnumNames<E>::values)
    if (v == e) return name;
  return "?";
}

// Every name of E, in the order listed.
template <class E>
std::vector<std::string> enum_names() {
  std::vector<std::string> out;
  for (const auto& [v, name] : EnumNames<E>::values) out.emplace_back(name);
  return out;
}

// The value named `s`. Throws nmt::Error "unknown WHAT 's' (expected a, b or c)".
template <class E>
E parse_enum(const std::string& s) {
  for (const auto& [v, name] : EnumNames<E>::values)
    if (s == name) return v;
  std::string expected;
  const auto& values = EnumNames<E>::values;
  for (size_t i = 0; i < values.size(); ++i)
    expected += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + std::string(values[i].second);
  throw Error(std::string("unknown ") + EnumNames<E>::what + " '" + excerpt(s) + "' (expected " + expected + ")");
}

}  // namespace nmt
