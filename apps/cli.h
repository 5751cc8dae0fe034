// Binds the fields of nmt's options structs (base/options.h, fields()) to
// CLI11: one option per field, with its help, --help section, default and,
// for enum fields, the names allowed. Shared by the three apps; the core
// never sees CLI11.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "base/blas_kernels.h"
#include "base/config.h"
#include "base/options.h"
#include "model/device.h"
#include "tools/app.h"

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

  // The visitor: one CLI11 option for `value`, and a hidden one for its
  // former spelling (Field::old_name). The two are not tied with CLI11's
  // excludes(), whose --help line would name the hidden one as nothing
  // ("Excludes:" alone): conflict() checks them after parsing.
  template <class T>
  void operator()(const Field& f, T& value) {
    if (f.has(kInternal)) return;
    CLI::Option* o = bind((f.short_name ? std::string(f.short_name) + "," : std::string()) + "--" + f.name, f.help, value);
    if (f.group != nullptr && *f.group != '\0') o->group(f.group);
    options_[f.name] = o;
    if (f.old_name != nullptr) {
      CLI::Option* old = bind(std::string("--") + f.old_name, f.help, value)->group("");
      old_names_.push_back({f.old_name, f.name, old});
    }
  }

  // "" when no option was given under both its names, else the message
  // "--OLD and --NEW are one option (--OLD is its former spelling): give it once".
  std::string conflict() const {
    for (const auto& o : old_names_)
      if (o.option->count() > 0 && options_.at(o.name)->count() > 0)
        return "--" + o.old_name + " and --" + o.name + " are one option (--" + o.old_name +
               " is its former spelling): give it once";
    return "";
  }

  // The long names of every option given on the command line (under either spelling).
  GivenOptions given() const {
    GivenOptions out;
    for (const auto& [name, option] : options_)
      if (option->count() > 0) out.insert(name);
    for (const auto& o : old_names_)
      if (o.option->count() > 0) out.insert(o.name);
    return out;
  }

  // One line for each former spelling used on the command line:
  // "--OLD is deprecated: use --NEW".
  std::vector<std::string> deprecations() const {
    std::vector<std::string> out;
    for (const auto& o : old_names_)
      if (o.option->count() > 0) out.push_back("--" + o.old_name + " is deprecated: use --" + o.name);
    return out;
  }

 private:
  template <class T>
  CLI::Option* bind(const std::string& flag, const char* help, T& value) {
    if constexpr (std::is_same_v<T, bool>) {
      return app_.add_flag(flag, value, help);
    } else if constexpr (std::is_enum_v<T>) {
      return app_.add_option_function<std::string>(
                     flag, [&value](const std::string& s) { value = parse_enum<T>(s); }, help)
          ->check(CLI::IsMember(enum_names<T>()))
          ->default_str(enum_name(value));
    } else if constexpr (IsVector<T>::value) {
      return app_.add_option(flag, value, help);
    } else {
      return app_.add_option(flag, value, help)->capture_default_str();
    }
  }

  struct OldName {
    std::string old_name, name;
    CLI::Option* option;
  };
  CLI::App& app_;
  std::map<std::string, CLI::Option*> options_;
  std::vector<OldName> old_names_;
};

// The path given with -c/--config (either "--config F" or "--config=F"),
// or "" when there is none.
inline std::string config_path(int argc, char** argv) {
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "-c" || a == "--config") && i + 1 < argc) path = argv[++i];
    else if (a.rfind("--config=", 0) == 0) path = a.substr(9);
  }
  return path;
}

// What every tool shares around its own options: -c/--config FILE (TOML,
// read before the command line so that flags override it), --dump-config
// (print the effective options as TOML and exit), --version and -v.
class Tool {
 public:
  // First, before anything else happens: opens /dev/null on a closed
  // stdin, stdout or stderr (tools/app.h), and switches OpenBLAS to the
  // widest kernels when it picked narrower ones (base/blas_kernels.h).
  Tool(CLI::App& app, const char* name) : app_(app), name_(name), binder_(app) {
    if (!ensure_standard_streams()) std::exit(kExitError);  // nothing to report on: stderr is what failed
    ensure_best_blas_kernels();
    app.add_option("-c,--config", config_, "TOML file of options (keys: the long option names, - or _; tables allowed)");
    app.add_flag("--dump-config", dump_, "Print the effective options as TOML (what --config reads) and exit");
    app.add_flag("-v,--verbose", verbose, "Debug logging");
    prefer_avx512_kernels();  // before any LibTorch kernel runs (start_runtime() would be late for some)
    app.set_version_flag("--version", version_string());
  }
  Binder& binder() { return binder_; }

  // Applies the config file of the command line to `options`, parses the
  // command line, and handles --dump-config. Returns -1 when the tool should
  // go on, else the exit code to return: 0 after help, version or dump,
  // kExitUsage (2) for a command line or config file that cannot be parsed
  // (CLI11's own codes 103..114 included), reported on stderr.
  template <class... Options>
  int parse(int argc, char** argv, Options&... options) {
    try {
      const std::string path = config_path(argc, argv);
      if (!path.empty()) {
        auto cfg = ConfigFile::read(path);
        (cfg.apply(options), ...);
        cfg.check_all_used();
        from_config_ = cfg.applied();
        config_deprecations_ = cfg.deprecations();
      }
    } catch (const Error& e) {
      std::fprintf(stderr, "%s: error: %s\n", name_, e.what());
      return kExitUsage;
    }
    try {
      app_.parse(argc, argv);
    } catch (const CLI::ExtrasError&) {  // CLI11 would say "not expected: 5 --beam"
      std::fprintf(stderr, "%s: error: %s; see --help\n", name_, unexpected(app_.remaining()).c_str());
      return kExitUsage;
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == 0) return app_.exit(e);  // --help, --version: printed, exit 0
      // One line, like every other error: the option and the problem.
      std::fprintf(stderr, "%s: error: %s (see --help)\n", name_, bounded_message(e.what()).c_str());
      return kExitUsage;
    }
    if (const std::string c = binder_.conflict(); !c.empty()) {
      std::fprintf(stderr, "%s: error: %s\n", name_, c.c_str());
      return kExitUsage;
    }
    for (const auto& line : binder_.deprecations()) std::fprintf(stderr, "%s: warning: %s\n", name_, line.c_str());
    for (const auto& line : config_deprecations_) std::fprintf(stderr, "%s: warning: %s\n", name_, line.c_str());
    if (dump_) {
      ConfigWriter w;
      (w.add(options), ...);
      std::fputs(w.str().c_str(), stdout);
      return 0;
    }
    return -1;
  }

  // The long names of the options set on the command line or in the config
  // file (what the core's flag-dependent defaults read: GivenOptions).
  GivenOptions given() const {
    GivenOptions out = binder_.given();
    out.insert(from_config_.begin(), from_config_.end());
    return out;
  }

  // The long names of the options set on the command line alone (a config
  // file describes a system, which a mode may use only part of).
  GivenOptions typed() const { return binder_.given(); }

  bool verbose = false;

 private:
  // What is wrong with the arguments CLI11 could not place (`extras`, in
  // command-line order): the first that looks like an option is unknown,
  // with the nearest option name as a suggestion ("unknown option '--beam'
  // (did you mean '--beam-size'?)", as config files get); else the first
  // is an argument no option takes.
  std::string unexpected(const std::vector<std::string>& extras) const {
    for (const auto& arg : extras) {
      const bool number = arg.find_first_not_of("-+.0123456789eE") == std::string::npos;
      if (arg.size() < 2 || arg[0] != '-' || number) continue;
      const std::string flag = arg.substr(0, arg.find('='));
      const std::string name = flag.substr(flag.rfind("--", 0) == 0 ? 2 : 1);
      std::vector<std::string> names;  // every long name --help shows (not the hidden former spellings)
      for (const CLI::Option* o : app_.get_options())
        if (!o->get_group().empty())
          for (const auto& n : o->get_lnames()) names.push_back(n);
      const std::string best = nearest_name(name, names);
      return "unknown option '" + excerpt(flag) + "'" + (best.empty() ? "" : " (did you mean '--" + best + "'?)");
    }
    return "unexpected argument '" + excerpt(extras.empty() ? std::string() : extras.front()) +
           "': options take the form --name VALUE";
  }

  CLI::App& app_;
  const char* name_;
  Binder binder_;
  std::string config_;
  bool dump_ = false;
  std::set<std::string> from_config_;
  std::vector<std::string> config_deprecations_;  // former spellings of keys in the config file
};

}  // namespace nmt::cli
