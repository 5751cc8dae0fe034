// ModelOptions' checks and its text form, stored in checkpoints.
#include "base/model_options.h"

#include <map>
#include <sstream>
#include <type_traits>

#include "base/check_ranges.h"
#include "base/error.h"
#include "base/format.h"
#include "base/utf8.h"

namespace nmt {

void ModelOptions::validate() const {
  // Named as stored in checkpoints ("model option emb_dim"); the flags spell them with '-' (--emb-dim).
  check_ranges(*this, OptionNaming::kModelKey);
  if (attention == AttentionType::kDot && dec_hidden != 2 * enc_hidden)
    throw UsageError("dot attention needs dec_hidden == 2 * enc_hidden (got " + std::to_string(dec_hidden) +
                " and " + std::to_string(enc_hidden) + "); use general or additive");
  if (tie_all_embeddings && !tie_embeddings)
    throw UsageError("tie_all_embeddings needs tie_embeddings (the target embeddings and output layer tied)");
  if (tie_all_embeddings && src_vocab != tgt_vocab)
    throw UsageError("tie_all_embeddings needs one vocabulary for both sides (got " + std::to_string(src_vocab) +
                     " source and " + std::to_string(tgt_vocab) + " target pieces)");
}

namespace {

// The text form of a field's value in a stored config.
template <class T>
std::string to_text(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "1" : "0";
  } else if constexpr (std::is_enum_v<T>) {
    return enum_name(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    return shortest_decimal(v);  // reads back to the same value (ostream's 6 digits would not)
  } else {
    std::ostringstream o;
    o << v;
    return o.str();
  }
}

// Reads `text` into *v; false when it is not a whole value of T.
template <class T>
bool from_text(const std::string& text, T* v) {
  if constexpr (std::is_same_v<T, bool>) {
    if (text != "0" && text != "1" && text != "true" && text != "false") return false;
    *v = text == "1" || text == "true";
    return true;
  } else if constexpr (std::is_enum_v<T>) {
    *v = parse_enum<T>(text);  // throws nmt::Error naming the expected values
    return true;
  } else {
    std::istringstream in(text);
    in >> *v;
    return !in.fail() && in.peek() == std::char_traits<char>::eof();
  }
}

}  // namespace

std::vector<std::string> ModelOptions::unused() const {
  const bool scored_by_a_layer = attention == AttentionType::kAdditive || attention == AttentionType::kConcat;
  if (!scored_by_a_layer && attn_dim != ModelOptions{}.attn_dim) return {"--attn-dim"};
  return {};
}

std::string ModelOptions::serialize() const {
  std::string out;
  fields(*this, [&](const Field& f, const auto& value) { out += underscored(f.name) + "=" + to_text(value) + "\n"; });
  return out;
}

std::string ModelOptions::field(const std::string& name) const {
  std::string out;
  bool found = false;
  fields(*this, [&](const Field& f, const auto& value) {
    if (underscored(f.name) == name) out = to_text(value), found = true;
  });
  if (!found) throw Error("unknown model option '" + name + "'");
  return out;
}

ModelOptions ModelOptions::parse(const std::string& text, const std::string& origin) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  std::string line;
  long n = 0;
  while (std::getline(in, line)) {
    ++n;
    auto t = trim(line);
    if (t.empty()) continue;
    auto eq = t.find('=');
    if (eq == std::string_view::npos) throw Error(located(origin, 0, "bad model config line " + std::to_string(n)));
    kv[std::string(t.substr(0, eq))] = std::string(t.substr(eq + 1));
  }
  ModelOptions m;
  fields(m, [&](const Field& f, auto& value) {
    const std::string key = underscored(f.name);
    auto it = kv.find(key);
    if (it == kv.end()) {
      if (f.has(kMayBeAbsent)) return;  // written before the field existed: the default applies
      throw Error(located(origin, 0, "model config lacks '" + key + "'"));
    }
    if (!from_text(it->second, &value)) throw Error(located(origin, 0, "bad value for " + key));
    kv.erase(it);
  });
  if (!kv.empty())
    throw Error(located(origin, 0, "unknown model option '" + kv.begin()->first +
                                       "' (written by a newer nmt? upgrade to read it)"));
  try {
    m.validate();
  } catch (const UsageError& e) {  // a stored value, not the user's: a bad file
    throw Error(located(origin, 0, e.what()));
  }
  return m;
}

}  // namespace nmt
