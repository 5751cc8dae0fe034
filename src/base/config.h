// TOML config files for the options structs, read and written through their
// field lists (fields.h): a new option is read, checked and dumped with no
// further code. Keys are the long option names, with '-' or '_'
// ("batch-tokens" or "batch_tokens"); tables ([model], [training], ...) may
// group them as the user likes, their names are not significant. Every
// problem is an nmt::Error naming file:line:column.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "base/error.h"
#include "base/fields.h"

namespace nmt {

// A value as a config file gives it.
using ConfigValue = std::variant<int64_t, double, bool, std::string, std::vector<std::string>, std::vector<double>>;

// What a config file may be, checked before toml++ reads it (toml++ bounds
// the nesting of inline values, not that of table headers and dotted keys;
// see ConfigFile::parse): nmt's own configs are a few kilobytes of keys in at
// most one level of tables.
constexpr size_t kConfigMaxBytes = size_t{1} << 20;  // a whole file
constexpr int64_t kConfigMaxKeyParts = 8;            // "a.b.c" has 3; "[model] emb-dim" 1 + 1
constexpr size_t kConfigMaxKeyBytes = 256;           // one part of a key

class ConfigFile {
 public:
  // Reads and parses `path`. Throws nmt::Error "PATH:LINE:COL: ..." for a
  // file that is not TOML (or holds a value of a type no option has, or a
  // key twice), "PATH:LINE: ..." for a table header or dotted key of more
  // than kConfigMaxKeyParts parts or a key part longer than
  // kConfigMaxKeyBytes, and nmt::Error "PATH: ..." for one that cannot be
  // read or is larger than kConfigMaxBytes.
  static ConfigFile read(const std::string& path);
  // The same for the text of a file, `path` naming it in messages.
  static ConfigFile parse(const std::string& text, const std::string& path);

  // Sets each field of `options` that the file names and marks the key used.
  // Throws nmt::Error "PATH:LINE:COL: KEY: ..." for a value of the wrong type
  // or an unknown name of an enum option.
  template <class Options>
  void apply(Options& options) {
    Options::fields(options, [this](const Field& f, auto& value) { apply_field(f, value); });
  }

  // Throws nmt::Error "PATH:LINE:COL: unknown option 'KEY' (did you mean
  // 'NAME'?)" for the first key that no apply() used, the suggestion drawn
  // from the fields seen by apply().
  void check_all_used() const;

  // The long option names of the keys apply() used (a former spelling,
  // Field::old_name, as the name it stands for).
  std::set<std::string> applied() const;
  // One line for each key apply() took under its former spelling:
  // "PATH:LINE: 'OLD' is deprecated: use 'NEW'". Never throws (beyond std::bad_alloc).
  std::vector<std::string> deprecations() const;
  const std::string& path() const { return path_; }

 private:
  struct Entry {
    ConfigValue value;
    int line = 0, column = 0;
    bool used = false;
    std::string used_as;  // the field name apply() read it for ("" : its own key)
  };
  template <class T>
  void apply_field(const Field& f, T& value);
  // The entry for `f`, under its name or its former spelling (marked used
  // as `f.name`); nullptr when the file has neither. Throws nmt::Error
  // "PATH:LINE:COL: OLD: ..." when the file gives both.
  Entry* find(const Field& f);
  [[noreturn]] void fail(const Entry& e, const std::string& key, const std::string& message) const;

  std::string path_;
  std::map<std::string, Entry> entries_;  // by long option name ('-' spelling)
  std::vector<std::string> known_;       // every field name apply() saw (for "did you mean")
};

// The name of `names` nearest to `name` (a misspelt option, without its
// dashes), for "did you mean": within an edit distance of max(2, a third of
// its length), a name that `name` begins up to one of its dashes ("beam" for
// "beam-size") counting as a distance of 1; the first of equally near names.
// "" when none is that near. Never throws (beyond std::bad_alloc).
std::string nearest_name(const std::string& name, const std::vector<std::string>& names);

// Collects fields and their values for str().
class ConfigWriter {
 public:
  template <class Options>
  ConfigWriter& add(const Options& options) {
    Options::fields(options, [this](const Field& f, const auto& value) {
      if (!f.has(kInternal)) add_value(f, to_config_value(value));
    });
    return *this;
  }
  // The options as a TOML document, one table per --help group (tables and
  // keys in the order the fields list them, each double in the shortest form
  // that reads back to it: 0.1, not 0.10000000000000001), which
  // ConfigFile::read() + apply() turn back into the same options. Never
  // throws (beyond std::bad_alloc).
  std::string str() const;

 private:
  template <class T>
  static ConfigValue to_config_value(const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      return v;
    } else if constexpr (std::is_enum_v<T>) {
      return std::string(enum_name(v));
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<int64_t>(v);
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<double>(v);
    } else {
      return v;  // std::string, std::vector<std::string> or std::vector<double>
    }
  }
  void add_value(const Field& f, ConfigValue v);
  struct Item {
    std::string group, name;
    ConfigValue value;
  };
  std::vector<Item> items_;
};

// `path` made absolute against the current folder, "." components dropped
// (".." kept: it may follow a symbolic link); "" and "-" (stdin/stdout) are
// returned as they are. Never throws (beyond std::bad_alloc): a current
// folder that cannot be read leaves `path` as it is.
std::string absolute_path(const std::string& path);

// Makes every path field (FieldFlag kPath) of `options` absolute, as
// absolute_path() does: what a run folder's config.toml stores, so that
// `nmt-train -c RUN/config.toml --resume` reads the same files from any folder.
template <class Options>
void make_paths_absolute(Options& options) {
  Options::fields(options, [](const Field& f, auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>) {
      if (f.has(kPath)) value = absolute_path(value);
    } else if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::vector<std::string>>) {
      if (f.has(kPath))
        for (auto& v : value) v = absolute_path(v);
    }
  });
}

template <class T>
void ConfigFile::apply_field(const Field& f, T& value) {
  known_.emplace_back(f.name);
  if (f.has(kInternal)) return;
  Entry* e = find(f);
  if (e == nullptr) return;
  e->used = true;
  const ConfigValue& v = e->value;
  if constexpr (std::is_same_v<T, bool>) {
    if (!std::holds_alternative<bool>(v)) fail(*e, f.name, "expected true or false");
    value = std::get<bool>(v);
  } else if constexpr (std::is_enum_v<T>) {
    if (!std::holds_alternative<std::string>(v)) fail(*e, f.name, "expected a name in quotes");
    try {
      value = parse_enum<T>(std::get<std::string>(v));
    } catch (const Error& err) {
      fail(*e, f.name, err.what());
    }
  } else if constexpr (std::is_integral_v<T>) {
    if (!std::holds_alternative<int64_t>(v)) fail(*e, f.name, "expected a whole number");
    const int64_t i = std::get<int64_t>(v);
    if ((std::is_unsigned_v<T> && i < 0) || (!std::is_unsigned_v<T> && sizeof(T) < 8 &&
                                             (i < static_cast<int64_t>(INT32_MIN) || i > static_cast<int64_t>(INT32_MAX))))
      fail(*e, f.name, "out of range");
    value = static_cast<T>(i);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (std::holds_alternative<int64_t>(v)) {
      value = static_cast<T>(std::get<int64_t>(v));
    } else if (std::holds_alternative<double>(v)) {
      value = static_cast<T>(std::get<double>(v));
    } else {
      fail(*e, f.name, "expected a number");
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!std::holds_alternative<std::string>(v)) fail(*e, f.name, "expected a string in quotes");
    value = std::get<std::string>(v);
  } else if constexpr (std::is_same_v<T, std::vector<double>>) {  // an array of numbers, or one number
    if (std::holds_alternative<std::vector<double>>(v)) {
      value = std::get<std::vector<double>>(v);
    } else if (std::holds_alternative<int64_t>(v)) {
      value = {static_cast<double>(std::get<int64_t>(v))};
    } else if (std::holds_alternative<double>(v)) {
      value = {std::get<double>(v)};
    } else if (std::holds_alternative<std::vector<std::string>>(v) && std::get<std::vector<std::string>>(v).empty()) {
      value.clear();  // [] reads as an empty array of strings
    } else {
      fail(*e, f.name, "expected a number or an array of numbers");
    }
  } else {  // std::vector<std::string>: an array of strings, or one string
    if (std::holds_alternative<std::string>(v)) {
      value = {std::get<std::string>(v)};
    } else if (std::holds_alternative<std::vector<std::string>>(v)) {
      value = std::get<std::vector<std::string>>(v);
    } else {
      fail(*e, f.name, "expected a string or an array of strings");
    }
  }
}

}  // namespace nmt
