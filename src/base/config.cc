// TOML config files through toml++ (see config.h).
#include "base/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/config_shape.h"
#include "base/format.h"
#include "base/read_file.h"

namespace nmt {
namespace {

// The '-' spelling of a key ("batch_tokens" -> "batch-tokens").
std::string dashed(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

// Edit distance, for "did you mean".
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string where(const std::string& path, const toml::source_region& s) {
  return path + ":" + std::to_string(s.begin.line) + ":" + std::to_string(s.begin.column);
}

// A TOML node as a ConfigValue; throws for a type no option has.
ConfigValue to_value(const toml::node& n, const std::string& path, const std::string& key) {
  if (auto v = n.as_integer()) return v->get();
  if (auto v = n.as_floating_point()) return v->get();
  if (auto v = n.as_boolean()) return v->get();
  if (auto v = n.as_string()) return v->get();
  if (auto a = n.as_array()) {  // of strings, or of numbers (the first element says which)
    if (!a->empty() && (a->front().is_integer() || a->front().is_floating_point())) {
      std::vector<double> out;
      for (const auto& el : *a) {
        if (auto i = el.as_integer()) {
          out.push_back(static_cast<double>(i->get()));
        } else if (auto f = el.as_floating_point()) {
          out.push_back(f->get());
        } else {
          throw Error(where(path, el.source()) + ": " + key + ": expected an array of numbers");
        }
      }
      return out;
    }
    std::vector<std::string> out;
    for (const auto& el : *a) {
      auto s = el.as_string();
      if (!s) throw Error(where(path, el.source()) + ": " + key + ": expected an array of strings");
      out.push_back(s->get());
    }
    return out;
  }
  throw Error(where(path, n.source()) + ": " + key + ": no option takes a value of this type");
}

// `s` as a TOML basic string, quotes included: '"' and '\\' escaped, control
// characters (and DEL) as \\uXXXX or their short escapes. Never throws (beyond std::bad_alloc).
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04X", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// A double as a TOML float: the shortest text that reads back to it, with a
// ".0" where that text would read as an integer; nan and inf as TOML has them.
std::string toml_float(double v) {
  std::string text = shortest_decimal(v);
  if (std::isfinite(v) && text.find_first_of(".eE") == std::string::npos) text += ".0";
  return text;
}

// One value of ConfigValue in TOML.
std::string toml_value(const ConfigValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<V, int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<V, double>) {
          return toml_float(v);
        } else if constexpr (std::is_same_v<V, std::string>) {
          return toml_string(v);
        } else if constexpr (std::is_same_v<V, std::vector<double>>) {
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) out += (i > 0 ? ", " : "") + toml_float(v[i]);
          return out + "]";
        } else {
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) out += (i > 0 ? ", " : "") + toml_string(v[i]);
          return out + "]";
        }
      },
      value);
}


}  // namespace

std::string nearest_name(const std::string& name, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = SIZE_MAX;
  const size_t most = std::max<size_t>(2, name.size() / 3);
  for (const auto& candidate : names) {
    // The distance is at least the difference in length: skip the quadratic
    // count where that alone is too far (a megabyte key would take minutes).
    const size_t gap = candidate.size() > name.size() ? candidate.size() - name.size() : name.size() - candidate.size();
    if (gap > most && !(candidate.size() > name.size() && candidate.compare(0, name.size(), name) == 0)) continue;
    // A leading part of a name up to one of its dashes ("beam" of "beam-size")
    // is as near as a one-letter slip.
    const bool head = candidate.size() > name.size() && candidate.compare(0, name.size(), name) == 0 &&
                      candidate[name.size()] == '-';
    const size_t d = head ? 1 : distance(name, candidate);
    if (d < best_d) best_d = d, best = candidate;
  }
  return best_d <= most ? best : std::string();
}

std::string absolute_path(const std::string& path) {
  if (path.empty() || path == "-") return path;
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) return path;
  std::filesystem::path out;
  for (const auto& part : abs)
    if (part != ".") out /= part;
  std::string s = out.string();
  if (s.size() > 1 && s.back() == '/') s.pop_back();  // "runs/x/" -> "/.../runs/x"
  return s;
}

ConfigFile ConfigFile::read(const std::string& path) {
  {
    std::ifstream probe(path);
    if (!probe) throw Error(located(path, 0, "cannot read the config file"));
  }
  return parse(read_file_bounded(path, kConfigMaxBytes, "config file"), path);
}

ConfigFile ConfigFile::parse(const std::string& text, const std::string& path) {
  check_shape(text, path);
  ConfigFile cfg;
  cfg.path_ = path;
  toml::table doc;
  try {
    doc = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw Error(where(path, e.source()) + ": not valid TOML: " + std::string(e.description()));
  }
  // Keys at the top level or in tables, at any depth.
  std::vector<const toml::table*> tables{&doc};
  while (!tables.empty()) {
    const toml::table* t = tables.back();
    tables.pop_back();
    for (const auto& [k, node] : *t) {
      const std::string key(k.str());
      if (const auto* sub = node.as_table()) {
        tables.push_back(sub);
        continue;
      }
      const std::string name = dashed(key);
      Entry e;
      e.value = to_value(node, path, key);
      e.line = static_cast<int>(k.source().begin.line);
      e.column = static_cast<int>(k.source().begin.column);
      auto [it, fresh] = cfg.entries_.emplace(name, std::move(e));
      if (!fresh)
        throw Error(path + ":" + std::to_string(k.source().begin.line) + ":" + std::to_string(k.source().begin.column) +
                    ": " + key + " is given twice (line " + std::to_string(it->second.line) + ")");
    }
  }
  return cfg;
}

ConfigFile::Entry* ConfigFile::find(const Field& f) {
  auto it = entries_.find(f.name);
  auto old = f.old_name != nullptr ? entries_.find(f.old_name) : entries_.end();
  if (old == entries_.end()) return it == entries_.end() ? nullptr : &it->second;
  if (it != entries_.end())
    fail(old->second, f.old_name,
         std::string("the former spelling of '") + f.name + "', which the file also gives: give it once");
  old->second.used_as = f.name;
  return &old->second;
}

void ConfigFile::fail(const Entry& e, const std::string& key, const std::string& message) const {
  throw Error(path_ + ":" + std::to_string(e.line) + ":" + std::to_string(e.column) + ": " + key + ": " + message);
}

void ConfigFile::check_all_used() const {
  // Report in file order.
  const std::pair<const std::string, Entry>* first = nullptr;
  for (const auto& kv : entries_)
    if (!kv.second.used && (first == nullptr || kv.second.line < first->second.line)) first = &kv;
  if (first == nullptr) return;
  const std::string best = nearest_name(first->first, known_);
  const std::string hint = best.empty() ? "" : " (did you mean '" + best + "'?)";
  throw Error(path_ + ":" + std::to_string(first->second.line) + ":" + std::to_string(first->second.column) +
              ": unknown option '" + excerpt(first->first) + "'" + hint);
}

std::set<std::string> ConfigFile::applied() const {
  std::set<std::string> out;
  for (const auto& [name, e] : entries_)
    if (e.used) out.insert(e.used_as.empty() ? name : e.used_as);
  return out;
}

std::vector<std::string> ConfigFile::deprecations() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_)
    if (e.used && !e.used_as.empty())
      out.push_back(path_ + ":" + std::to_string(e.line) + ": '" + name + "' is deprecated: use '" + e.used_as + "'");
  return out;
}

void ConfigWriter::add_value(const Field& f, ConfigValue v) {
  std::string group;
  for (const char* c = f.group; c != nullptr && *c != '\0' && *c != ' ' && *c != '('; ++c)
    group.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(*c))));
  items_.push_back({group.empty() ? "general" : group, f.name, std::move(v)});
}

std::string ConfigWriter::str() const {
  // Written by hand rather than through toml++, whose floats carry 17
  // significant digits (dropout = 0.20000000000000001): each double is
  // written in its shortest form that reads back to the same value.
  std::vector<std::string> groups;  // in the order the fields list them
  for (const auto& item : items_)
    if (std::find(groups.begin(), groups.end(), item.group) == groups.end()) groups.push_back(item.group);
  std::string out;
  for (const auto& group : groups) {
    out += (out.empty() ? "[" : "\n[") + group + "]\n";
    for (const auto& item : items_)
      if (item.group == group) out += item.name + " = " + toml_value(item.value) + "\n";
  }
  return out;
}

}  // namespace nmt
