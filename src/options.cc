// Names of enum options and the text form of ModelOptions stored in checkpoints.
#include "options.h"

#include <map>
#include <sstream>

#include "error.h"
#include "utf8.h"

namespace nmt {

const char* to_string(AttentionType t) {
  switch (t) {
    case AttentionType::kAdditive: return "additive";
    case AttentionType::kDot: return "dot";
    case AttentionType::kGeneral: return "general";
    case AttentionType::kConcat: return "concat";
    case AttentionType::kNone: return "none";
  }
  return "?";
}

AttentionType parse_attention(const std::string& s) {
  for (auto t : {AttentionType::kAdditive, AttentionType::kDot, AttentionType::kGeneral,
                 AttentionType::kConcat, AttentionType::kNone})
    if (s == to_string(t)) return t;
  throw Error("unknown attention '" + s + "' (expected additive, dot, general, concat or none)");
}

const char* to_string(StopMetric m) {
  switch (m) {
    case StopMetric::kLoss: return "loss";
    case StopMetric::kPerplexity: return "perplexity";
    case StopMetric::kBleu: return "bleu";
    case StopMetric::kChrf: return "chrf";
  }
  return "?";
}

StopMetric parse_stop_metric(const std::string& s) {
  for (auto m : {StopMetric::kLoss, StopMetric::kPerplexity, StopMetric::kBleu, StopMetric::kChrf})
    if (s == to_string(m)) return m;
  throw Error("unknown metric '" + s + "' (expected loss, perplexity, bleu or chrf)");
}

void ModelOptions::validate() const {
  auto positive = [](int64_t v, const char* name) {
    if (v <= 0) throw Error(std::string("model option ") + name + " must be positive, got " + std::to_string(v));
  };
  positive(src_vocab, "src_vocab");
  positive(tgt_vocab, "tgt_vocab");
  positive(emb_dim, "emb_dim");
  positive(enc_hidden, "enc_hidden");
  positive(enc_layers, "enc_layers");
  positive(dec_hidden, "dec_hidden");
  positive(attn_dim, "attn_dim");
  if (dropout < 0 || dropout >= 1) throw Error("model option dropout must be in [0, 1)");
  if (attention == AttentionType::kDot && dec_hidden != 2 * enc_hidden)
    throw Error("dot attention needs dec_hidden == 2 * enc_hidden (got " + std::to_string(dec_hidden) +
                " and " + std::to_string(enc_hidden) + "); use general or additive");
}

std::string ModelOptions::serialize() const {
  std::ostringstream o;
  o << "src_vocab=" << src_vocab << "\n"
    << "tgt_vocab=" << tgt_vocab << "\n"
    << "emb_dim=" << emb_dim << "\n"
    << "enc_hidden=" << enc_hidden << "\n"
    << "enc_layers=" << enc_layers << "\n"
    << "dec_hidden=" << dec_hidden << "\n"
    << "attn_dim=" << attn_dim << "\n"
    << "attention=" << to_string(attention) << "\n"
    << "dropout=" << dropout << "\n"
    << "tie_embeddings=" << (tie_embeddings ? 1 : 0) << "\n";
  return o.str();
}

std::string ModelOptions::field(const std::string& name) const {
  std::istringstream in(serialize());
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, name.size() + 1, name + "=") == 0) return line.substr(name.size() + 1);
  throw Error("unknown model option '" + name + "'");
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
  auto take_int = [&](const char* k, int64_t& v) {
    auto it = kv.find(k);
    if (it == kv.end()) throw Error(located(origin, 0, std::string("model config lacks '") + k + "'"));
    try { v = std::stoll(it->second); } catch (...) { throw Error(located(origin, 0, std::string("bad value for ") + k)); }
    kv.erase(it);
  };
  take_int("src_vocab", m.src_vocab);
  take_int("tgt_vocab", m.tgt_vocab);
  take_int("emb_dim", m.emb_dim);
  take_int("enc_hidden", m.enc_hidden);
  take_int("enc_layers", m.enc_layers);
  take_int("dec_hidden", m.dec_hidden);
  take_int("attn_dim", m.attn_dim);
  int64_t tie = 0;
  take_int("tie_embeddings", tie);
  m.tie_embeddings = tie != 0;
  auto it = kv.find("attention");
  if (it == kv.end()) throw Error(located(origin, 0, "model config lacks 'attention'"));
  m.attention = parse_attention(it->second);
  kv.erase(it);
  it = kv.find("dropout");
  if (it == kv.end()) throw Error(located(origin, 0, "model config lacks 'dropout'"));
  try { m.dropout = std::stod(it->second); } catch (...) { throw Error(located(origin, 0, "bad value for dropout")); }
  kv.erase(it);
  if (!kv.empty())
    throw Error(located(origin, 0, "unknown model option '" + kv.begin()->first +
                                       "' (written by a newer nmt? upgrade to read it)"));
  m.validate();
  return m;
}

}  // namespace nmt
