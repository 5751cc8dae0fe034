// TOML config files through toml++ (see config.h).
#include "base/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

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
        } else {
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) out += (i > 0 ? ", " : "") + toml_string(v[i]);
          return out + "]";
        }
      },
      value);
}

// What check_shape() found: one chain of key parts ("a.b.c", a table
// header's or a dotted key's) as it is scanned.
struct KeyChain {
  long line = 0;            // where it began
  int64_t parts = 0;        // 0: no chain open
  size_t longest = 0;       // bytes of its longest part
  bool header = false;      // inside "[...]" or "[[...]]" at the start of a line
  bool after_dot = false;   // its last part is followed by '.'
};

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

// The scan of check_shape(): the chain being read and where the scan is.
class ShapeScanner {
 public:
  ShapeScanner(const std::string& text, const std::string& path) : text_(text), path_(path), n_(text.size()) {}

  // Scans the whole text; throws as check_shape() does.
  void run() {
    i_ = text_.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // a UTF-8 byte order mark
    while (i_ < n_) step();
    end_chain('\0');
  }

 private:
  // Ends the chain; `next` is the character that ended it ('\0': none).
  // Throws nmt::Error "PATH:LINE: ..." for a chain of too many parts, or a
  // key with a part too long.
  void end_chain(char next) {
    if (chain_.parts == 0) return;
    if (chain_.parts > kConfigMaxKeyParts)
      throw Error(located(path_, chain_.line,
                          std::string(chain_.header ? "table header" : "dotted key") + " with " +
                              std::to_string(chain_.parts) + " dotted parts; nmt's config keys have at most " +
                              std::to_string(kConfigMaxKeyParts) + " (its options need a [table] and a key)"));
    const bool key = next == '=' || (chain_.header && next == ']');
    if (key && chain_.longest > kConfigMaxKeyBytes)
      throw Error(located(path_, chain_.line,
                          "key of " + std::to_string(chain_.longest) + " bytes; nmt's config keys have at most " +
                              std::to_string(kConfigMaxKeyBytes) + " (its option names are far shorter)"));
    chain_ = KeyChain{};
  }

  // A bare key, quoted key or value of `bytes` bytes was read.
  void part(size_t bytes) {
    if (chain_.parts > 0 && chain_.after_dot) {
      ++chain_.parts;
      chain_.after_dot = false;
      chain_.longest = std::max(chain_.longest, bytes);
      return;
    }
    end_chain('\0');
    chain_.line = line_;
    chain_.parts = 1;
    chain_.longest = bytes;
    chain_.header = header_pending_;
    header_pending_ = false;
  }

  static bool bare(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  }

  // The string opened by quote `c` at i_: a multi-line one is skipped (a
  // value, never a key), a one-line one is a part. Throws as end_chain().
  void string(char c) {
    const std::string& text = text_;
    const size_t n = n_;
    size_t& i = i_;
    const bool triple = i + 2 < n && text[i + 1] == c && text[i + 2] == c;
    if (triple) {  // a multi-line string: a value, never a key
      end_chain(c);
      i += 3;
      while (i < n) {
        if (text[i] == '\n') ++line_;
        if (c == '"' && text[i] == '\\' && i + 1 < n) {
          if (text[i + 1] == '\n') ++line_;
          i += 2;
          continue;
        }
        if (text[i] == c && i + 2 < n && text[i + 1] == c && text[i + 2] == c) {
          i += 3;
          for (int extra = 0; extra < 2 && i < n && text[i] == c; ++extra) ++i;  // """a"""" ends with a quote
          break;
        }
        ++i;
      }
      return;
    }
    const size_t begin = ++i;  // a one-line string: a quoted key or a value
    while (i < n && text[i] != c && text[i] != '\n') i += (c == '"' && text[i] == '\\' && i + 1 < n && text[i + 1] != '\n') ? 2 : 1;
    part(i - begin);
    if (i < n && text[i] == c) ++i;
  }

  // Reads what starts at i_ (a character, a comment, a string or a bare
  // run) and moves past it. Throws as end_chain().
  void step() {
    const std::string& text = text_;
    const size_t n = n_;
    size_t& i = i_;
    const char c = text[i];
    if (c == '\n') {
      end_chain('\n');
      ++line_;
      line_start_ = true;
      header_pending_ = false;
      ++i;
      return;
    }
    if (c == ' ' || c == '\t' || c == '\r') {  // may stand around the dots of a key
      ++i;
      return;
    }
    const bool was_line_start = line_start_;
    line_start_ = false;
    if (c == '#') {  // a comment, to the end of the line
      while (i < n && text[i] != '\n') ++i;
      return;
    }
    if (c == '"' || c == '\'') {
      string(c);
      return;
    }
    if (bare(c)) {
      const size_t begin = i;
      while (i < n && bare(text[i])) ++i;
      part(i - begin);
      return;
    }
    if (c == '.' && chain_.parts > 0 && !chain_.after_dot) {
      chain_.after_dot = true;
      ++i;
      return;
    }
    if (c == '[' && (was_line_start || (header_pending_ && i > 0 && text[i - 1] == '['))) {
      end_chain(c);
      header_pending_ = true;
      ++i;
      return;
    }
    end_chain(c);  // '=', ']', ',', '{', '}', a stray '.', ...
    ++i;
  }

  const std::string& text_;
  const std::string& path_;
  const size_t n_;
  KeyChain chain_;
  bool line_start_ = true;       // only whitespace so far on this line
  bool header_pending_ = false;  // "[" or "[[" opened this line; no part yet
  long line_ = 1;
  size_t i_ = 0;
};

void check_shape(const std::string& text, const std::string& path) { ShapeScanner(text, path).run(); }

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
  const std::string best = nearest_name(first->first, known_);
  const std::string hint = best.empty() ? "" : " (did you mean '" + best + "'?)";
  throw Error(path_ + ":" + std::to_string(first->second.line) + ":" + std::to_string(first->second.column) +
              ": unknown option '" + excerpt(first->first) + "'" + hint);
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
