// Names of enum options and the text form of ModelOptions stored in checkpoints.
#include "options.h"

#include <map>
#include <sstream>

#include "error.h"
#include "utf8.h"
#include "validate.h"

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

const char* to_string(DecoderType t) {
  switch (t) {
    case DecoderType::kBahdanau: return "bahdanau";
    case DecoderType::kCgru: return "cgru";
  }
  return "?";
}

DecoderType parse_decoder(const std::string& s) {
  for (auto t : {DecoderType::kBahdanau, DecoderType::kCgru})
    if (s == to_string(t)) return t;
  throw Error("unknown decoder '" + s + "' (expected bahdanau or cgru)");
}

const char* to_string(OptimizerType t) {
  switch (t) {
    case OptimizerType::kAdam: return "adam";
    case OptimizerType::kSgd: return "sgd";
  }
  return "?";
}

OptimizerType parse_optimizer(const std::string& s) {
  for (auto t : {OptimizerType::kAdam, OptimizerType::kSgd})
    if (s == to_string(t)) return t;
  throw Error("unknown optimizer '" + s + "' (expected adam or sgd)");
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
  // Field names as stored in checkpoints; the flags spell them with '-' (--emb-dim).
  constexpr int64_t kMaxDim = 1 << 16, kMaxVocab = 1 << 22;
  check::in_range("model option src_vocab", src_vocab, 1, kMaxVocab);
  check::in_range("model option tgt_vocab", tgt_vocab, 1, kMaxVocab);
  check::in_range("model option emb_dim", emb_dim, 1, kMaxDim);
  check::in_range("model option enc_hidden", enc_hidden, 1, kMaxDim);
  check::in_range("model option enc_layers", enc_layers, 1, 64);
  check::in_range("model option dec_hidden", dec_hidden, 1, kMaxDim);
  check::in_range("model option attn_dim", attn_dim, 1, kMaxDim);
  check::in_range("model option dropout", dropout, 0.0, 1.0, check::End::kClosed, check::End::kOpen);
  if (attention == AttentionType::kDot && dec_hidden != 2 * enc_hidden)
    throw Error("dot attention needs dec_hidden == 2 * enc_hidden (got " + std::to_string(dec_hidden) +
                " and " + std::to_string(enc_hidden) + "); use general or additive");
}

void TokenizerOptions::validate() const {
  if (model_type != "unigram" && model_type != "bpe")
    throw Error("--spm-type must be unigram or bpe, got '" + model_type + "'");
  check::in_range("--vocab-size", vocab_size, 8, 1 << 22);
  check::in_range("--character-coverage", character_coverage, 0.0, 1.0, check::End::kOpen);
  check::in_range("--spm-sentences", input_sentence_size, 1);
}

void DistributedOptions::validate() const {
  check::in_range("--world-size", world_size, 1, 1 << 16);
  if (rank < 0 || rank >= world_size)
    throw Error("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(world_size - 1) +
                " (--rank must be below --world-size " + std::to_string(world_size) + ")");
  check::in_range("--local-rank", local_rank, 0, 1 << 16);
  check::in_range("--master-port", master_port, 1, 65535);
  check::in_range("--dist-timeout", timeout_minutes, 0.0, 7 * 24 * 60.0, check::End::kOpen);
  check::in_range("bucket size (MB)", bucket_mb, 1, 1 << 14);
}

void TrainOptions::validate() const {
  using check::End;
  using check::in_range;
  using check::kNoLimit;
  in_range("--max-src-tokens", max_src_tokens, 1);
  in_range("--max-tgt-tokens", max_tgt_tokens, 1);
  in_range("--guided-alignment-weight", guided_alignment_weight, 0.0, kNoLimit);
  in_range("--spm-alpha", spm_alpha, 0.0, 100.0);
  in_range("--spm-nbest", spm_nbest, 2, 1000);
  if (spm_alpha > 0 && !guided_alignment.empty())
    throw Error("--spm-alpha cannot be combined with --guided-alignment (its links are per piece of one segmentation)");
  in_range("--batch-tokens", batch_tokens, 1);
  in_range("--max-batch-sentences", max_batch_sentences, 1);
  in_range("--learning-rate", learning_rate, 0.0, kNoLimit, End::kOpen);
  in_range("Adam beta1", adam_beta1, 0.0, 1.0, End::kClosed, End::kOpen);
  in_range("Adam beta2", adam_beta2, 0.0, 1.0, End::kClosed, End::kOpen);
  in_range("--weight-decay", weight_decay, 0.0, kNoLimit);
  in_range("--clip-norm", clip_norm, 0.0, kNoLimit);
  in_range("--label-smoothing", label_smoothing, 0.0, 1.0, End::kClosed, End::kOpen);
  in_range("--lr-decay", lr_decay, 0.0, 1.0, End::kOpen);
  in_range("--lr-patience", lr_patience, 1);
  in_range("--min-lr", min_lr, 0.0, kNoLimit);
  in_range("--max-epochs", max_epochs, 1);
  in_range("--max-steps", max_steps, 0);
  in_range("--max-minutes", max_minutes, 0.0, kNoLimit);
  in_range("--early-stopping", early_stopping, 0);
  in_range("--max-bad-steps", max_bad_steps, 1);
  in_range("--log-every", log_every, 0);
  in_range("--valid-every", valid_every, 0);
  in_range("--keep-checkpoints", keep_checkpoints, 0);
  in_range("--average", average, 0, 1000);
  if (average > keep_checkpoints)
    throw Error("--average " + std::to_string(average) + " needs --keep-checkpoints of at least " +
                std::to_string(average) + " (it is " + std::to_string(keep_checkpoints) + ")");
  in_range("--valid-max-sentences", valid_max_sentences, 0);
  in_range("validation batch size", valid_batch_sentences, 1);
  in_range("--threads", threads, 0, kMaxThreads);
  if (output_dir.empty()) throw Error("--output must name a folder");
  dist.validate();
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
    << "decoder=" << to_string(decoder) << "\n"
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
  it = kv.find("decoder");  // absent from checkpoints written before cgru existed
  if (it != kv.end()) {
    m.decoder = parse_decoder(it->second);
    kv.erase(it);
  }
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
