// TOML config files through toml++ (see config.h).
#include "base/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

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
  if (auto a = n.as_array()) {
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

}  // namespace

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
  std::ifstream probe(path);
  if (!probe) throw Error(located(path, 0, "cannot read the config file"));
  ConfigFile cfg;
  cfg.path_ = path;
  toml::table doc;
  try {
    doc = toml::parse_file(path);
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
  return it == entries_.end() ? nullptr : &it->second;
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
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& name : known_) {
    const size_t d = distance(first->first, name);
    if (d < best_d) best_d = d, best = name;
  }
  std::string hint;
  if (!best.empty() && best_d <= std::max<size_t>(2, first->first.size() / 3)) hint = " (did you mean '" + best + "'?)";
  throw Error(path_ + ":" + std::to_string(first->second.line) + ":" + std::to_string(first->second.column) +
              ": unknown option '" + first->first + "'" + hint);
}

std::set<std::string> ConfigFile::applied() const {
  std::set<std::string> out;
  for (const auto& [name, e] : entries_)
    if (e.used) out.insert(name);
  return out;
}

void ConfigWriter::add_value(const Field& f, ConfigValue v) {
  std::string group;
  for (const char* c = f.group; c != nullptr && *c != '\0' && *c != ' ' && *c != '('; ++c)
    group.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(*c))));
  items_.push_back({group.empty() ? "general" : group, f.name, std::move(v)});
}

std::string ConfigWriter::str() const {
  toml::table doc;
  for (const auto& item : items_) {
    auto* table = doc[item.group].as_table();
    if (table == nullptr) table = doc.insert_or_assign(item.group, toml::table{}).first->second.as_table();
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::vector<std::string>>) {
            toml::array a;
            for (const auto& s : v) a.push_back(s);
            table->insert_or_assign(item.name, std::move(a));
          } else {
            table->insert_or_assign(item.name, v);
          }
        },
        item.value);
  }
  std::ostringstream out;
  out << doc << '\n';
  return out.str();
}

}  // namespace nmt
