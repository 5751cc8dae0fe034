// Binds the fields of nmt's options structs (base/options.h, fields()) to
// CLI11: one option per field, with its help, --help section, default and,
// for enum fields, the names allowed. Shared by the three apps; the core
// never sees CLI11.
#pragma once
#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "base/options.h"

namespace nmt::cli {

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

class Binder {
 public:
  explicit Binder(CLI::App& app) : app_(app) {}

  // Adds all fields of `options` (a struct with fields()) to the app.
  template <class Options>
  Binder& add(Options& options) {
    Options::fields(options, *this);
    return *this;
  }

  // The visitor: one CLI11 option for `value`.
  template <class T>
  void operator()(const Field& f, T& value) {
    if (f.has(kInternal)) return;
    const std::string flag = (f.short_name ? std::string(f.short_name) + "," : std::string()) + "--" + f.name;
    CLI::Option* o = nullptr;
    if constexpr (std::is_same_v<T, bool>) {
      o = app_.add_flag(flag, value, f.help);
    } else if constexpr (std::is_enum_v<T>) {
      o = app_.add_option_function<std::string>(
                  flag, [&value](const std::string& s) { value = parse_enum<T>(s); }, f.help)
              ->check(CLI::IsMember(enum_names<T>()))
              ->default_str(enum_name(value));
    } else if constexpr (IsVector<T>::value) {
      o = app_.add_option(flag, value, f.help);
    } else {
      o = app_.add_option(flag, value, f.help)->capture_default_str();
    }
    if (f.has(kRequired)) o->required();
    if (f.group != nullptr && *f.group != '\0') o->group(f.group);
    options_[f.name] = o;
  }

  // Whether --NAME was given, on the command line or in a config file.
  bool given(const std::string& name) const {
    auto it = options_.find(name);
    return it != options_.end() && it->second->count() > 0;
  }

 private:
  CLI::App& app_;
  std::map<std::string, CLI::Option*> options_;
};

}  // namespace nmt::cli
