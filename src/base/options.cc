// The checks of every options struct, and the text form of ModelOptions
// stored in checkpoints.
#include "base/options.h"

#include <map>
#include <sstream>
#include <type_traits>

#include "base/error.h"
#include "base/format.h"
#include "base/utf8.h"
#include "base/validate.h"

namespace nmt {

namespace {

// The `noun` data ("training", "validation") comes as --WHAT-src with
// --WHAT-tgt, or as --WHAT-tsv: throws nmt::UsageError naming the option
// that is missing (when the data is `required`, or half given) or the two
// that exclude each other.
void require_pair_files(const std::string& what, const char* noun, const std::string& src, const std::string& tgt,
                        const std::string& tsv, bool required) {
  const std::string o = "--" + what;
  if (!tsv.empty()) {
    if (!src.empty() || !tgt.empty())
      throw UsageError(o + "-tsv excludes " + o + "-src and " + o + "-tgt: give the " + noun +
                       " data as two files or as one TSV");
    return;
  }
  if (src.empty() && tgt.empty()) {
    if (required)
      throw UsageError("option " + o + "-src is required (with " + o + "-tgt), or give " + o + "-tsv: the " + noun +
                       " data");
    return;
  }
  if (src.empty()) throw UsageError("option " + o + "-src is required with " + o + "-tgt");
  if (tgt.empty()) throw UsageError("option " + o + "-tgt is required with " + o + "-src");
}

}  // namespace

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
  check::in_range("model option word_dropout", word_dropout, 0.0, 1.0, check::End::kClosed, check::End::kOpen);
  check::in_range("model option alignment_head", alignment_head, 0, kMaxDim);
  if (attention == AttentionType::kDot && dec_hidden != 2 * enc_hidden)
    throw UsageError("dot attention needs dec_hidden == 2 * enc_hidden (got " + std::to_string(dec_hidden) +
                " and " + std::to_string(enc_hidden) + "); use general or additive");
}

void RuntimeOptions::validate() const {
  check::in_range("--threads", threads, 0, kMaxThreads);
  if (device.empty()) throw UsageError("--device must be cpu, cuda, cuda:N or auto");
}

void TokenizerOptions::validate() const {
  if (model_type != "unigram" && model_type != "bpe")
    throw UsageError("--spm-type must be unigram or bpe, got '" + excerpt(model_type) + "'");
  check::in_range("--vocab-size", vocab_size, 8, 1 << 22);
  check::in_range("--character-coverage", character_coverage, 0.0, 1.0, check::End::kOpen);
  check::in_range("--spm-sentences", input_sentence_size, 1);
  if (!tgt_model.empty() && src_model.empty())
    throw UsageError("--tgt-spm needs --src-spm too (or give neither and the tokenizers are trained)");
}

void DistributedOptions::validate() const {
  check::in_range("--world-size", world_size, 1, 1 << 16);
  if (rank < 0 || rank >= world_size)
    throw UsageError("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(world_size - 1) +
                " (--rank must be below --world-size " + std::to_string(world_size) + ")");
  check::in_range("--local-rank", local_rank, 0, 1 << 16);
  check::in_range("--master-port", master_port, 1, 65535);
  check::in_range("--dist-timeout", timeout_minutes, 0.0, 7 * 24 * 60.0, check::End::kOpen);
  check::in_range("--bucket-mb", bucket_mb, 1, 1 << 14);
}

void ReleaseOptions::validate() const {
  for (const auto& [name, p] : {std::pair<const char*, const std::vector<std::string>&>{"--release", paths},
                                {"--convert", convert}})
    if (!p.empty() && (p.size() != 2 || p[0].empty() || p[1].empty()))
      throw UsageError(std::string(name) + " takes two paths: the checkpoint to read and the one to write (" + name +
                       " IN.ckpt OUT.ckpt)");
  if (!paths.empty() && !convert.empty()) throw UsageError("--release and --convert exclude each other: one at a time");
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
    throw UsageError("--spm-alpha cannot be combined with --guided-alignment (its links are per piece of one segmentation)");
  in_range("--batch-tokens", batch_tokens, 1);
  in_range("--max-batch-sentences", max_batch_sentences, 1);
  in_range("--batch-parts", batch_parts, 0, kMaxThreads);
  in_range("--learning-rate", learning_rate, 0.0, kNoLimit, End::kOpen);
  in_range("--adam-beta1", adam_beta1, 0.0, 1.0, End::kClosed, End::kOpen);
  in_range("--adam-beta2", adam_beta2, 0.0, 1.0, End::kClosed, End::kOpen);
  in_range("--weight-decay", weight_decay, 0.0, kNoLimit);
  in_range("--clip-norm", clip_norm, 0.0, kNoLimit);
  in_range("--label-smoothing", label_smoothing, 0.0, 1.0, End::kClosed, End::kOpen);
  in_range("--lr-decay", lr_decay, 0.0, 1.0, End::kOpen);
  in_range("--lr-patience", lr_patience, 1);
  in_range("--lr-decay-start", lr_decay_start, 0);
  in_range("--min-lr", min_lr, 0.0, kNoLimit);
  in_range("--max-epochs", max_epochs, 1);
  in_range("--max-steps", max_steps, 0);
  in_range("--max-minutes", max_minutes, 0.0, kNoLimit);
  in_range("--early-stopping", early_stopping, 0);
  in_range("--max-bad-steps", max_bad_steps, 1);
  in_range("--seed", seed, 0);
  in_range("--log-every", log_every, 0);
  in_range("--valid-every", valid_every, 0);
  in_range("--keep-checkpoints", keep_checkpoints, 0);
  in_range("--average", average, 0, 1000);
  if (average > keep_checkpoints)
    throw UsageError("--average " + std::to_string(average) + " needs --keep-checkpoints of at least " +
                std::to_string(average) + " (it is " + std::to_string(keep_checkpoints) + ")");
  in_range("--valid-max-sentences", valid_max_sentences, 0);
  in_range("--valid-batch-size", valid_batch_sentences, 1);
  runtime.validate();
  if (output_dir.empty()) throw UsageError("--output must name a folder");
  dist.validate();
  require_pair_files("train", "training", train_src, train_tgt, train_tsv, /*required=*/true);
  require_pair_files("valid", "validation", valid_src, valid_tgt, valid_tsv, /*required=*/false);
}

void SearchOptions::validate() const {
  check::in_range("--beam-size", beam_size, 1, kMaxBeamSize);
  check::in_range("--length-penalty", length_penalty, 0.0, 10.0);
  check::in_range("--max-length-ratio", max_length_ratio, 0.0, 1000.0, check::End::kOpen);
  check::in_range("--max-length", max_length, 1, 1 << 20);
  if (n_best < 1 || n_best > beam_size)
    throw UsageError("--n-best must be between 1 and the beam size (" + std::to_string(beam_size) + "), got " +
                std::to_string(n_best));
}

void ShortlistOptions::validate() const {
  check::in_range("--shortlist-best", best, 1, 1 << 20);
  check::in_range("--shortlist-frequent", frequent, 0, 1 << 30);
}

void TranslateOptions::validate() const {
  check::in_range("--batch-size", batch_sentences, 1, 1 << 20);
  check::in_range("--batch-tokens", batch_tokens, 0);
  check::in_range("--max-input-length", max_input_length, 0, 1 << 20);
  check::in_range("--parallel-batches", parallel_batches, 0, 1024);
  if (int8 && bf16) throw UsageError("--int8 and --bf16 exclude each other: pick one precision for the decoder's products");
  search.validate();
  shortlist.validate();
}

void StreamOptions::validate() const {
  check::in_range("--window", window, 1, 1 << 20);
  check::in_range("--max-line-bytes", max_line_bytes, 1, int64_t{1} << 30);
  runtime.validate();
  translate.validate();
  const bool reference = !references.empty();
  for (const auto& r : references)
    if (r.empty()) throw UsageError("--reference must name a file");
  if (!scores_json.empty() && !reference) throw UsageError("--scores-json needs --reference");
  if (!reference && (bleu_lowercase || bleu_tokenize != BleuTokenizer::k13a))
    throw UsageError("--tokenize and --lowercase choose how --reference is scored: give --reference");
  if (score_format != ScoreFormat::kText && !evaluate)
    throw UsageError("--score-format chooses how --evaluate prints its scores; while translating, the output holds "
                     "the translations and the scores go to stderr (and --scores-json)");
  if (info && (score_mode || reference || !input.empty()))
    throw UsageError("--info prints what the checkpoints hold and exits: drop --score-pairs, --reference and --input");
  if (evaluate) {  // scores the input as it is: nothing to translate with
    if (!reference) throw UsageError("--evaluate scores the input against --reference: give --reference");
    if (!model_paths.empty() || score_mode || info)
      throw UsageError("--evaluate scores given translations: drop -m, --score-pairs and --info");
  } else if (model_paths.empty()) {
    throw UsageError("option --model (-m) is required: the checkpoint to translate with (repeat it for an ensemble)");
  }
  if (score_mode) {  // options that would do nothing there
    if (translate.search.beam_size != 1)
      throw UsageError("--beam-size does nothing with --score-pairs (it scores given pairs)");
    if (translate.search.n_best != 1) throw UsageError("--n-best does nothing with --score-pairs (it scores given pairs)");
    if (scores || replace_unk) throw UsageError("--with-scores and --replace-unk do nothing with --score-pairs");
    if (reference) throw UsageError("--reference does nothing with --score-pairs");
    if (src.empty() != tgt.empty())
      throw UsageError(std::string("option ") + (src.empty() ? "--src" : "--tgt") + " is required with " +
                       (src.empty() ? "--tgt" : "--src") + " (--score-pairs reads both, or one TSV input)");
    if (!src.empty() && !input.empty())
      throw UsageError("--score-pairs reads --src and --tgt, or a TSV input (-i), not both");
  } else if (!src.empty() || !tgt.empty()) {
    throw UsageError("--src and --tgt are the pairs of --score-pairs; to translate, give -i (or stdin)");
  }
}

void WordAlignerOptions::validate() const {
  check::in_range("--ibm-iterations", iterations, 1, 1000);
  check::in_range("--ibm-null-prob", null_prob, 0.0, 1.0, check::End::kOpen, check::End::kOpen);
  check::in_range("--ibm-tension", diagonal_tension, 0.0, 1000.0);
  check::in_range("--ibm-alpha", alpha, 0.0, check::kNoLimit);
}

void AlignRunOptions::validate() const {
  check::in_range("--threshold", threshold, 0.0, 1.0);
  check::in_range("--shift", shift, 0, 4);
  check::in_range("--max-pairs", max_pairs, 0);
  check::in_range("--max-input-length", max_input_length, 0, 1 << 20);
  runtime.validate();
  ibm.validate();
  search.validate();
  if (format == AlignFormat::kSvg && output_dir.empty() && heatmap_dir.empty())
    throw UsageError("--format svg writes one file per pair: give --output-dir");
  check::in_range("--lex-best", lex_best, 1, 1 << 20);
  const bool ibm2 = aligner == Aligner::kIbm2;
  if (format == AlignFormat::kLex) {
    if (!ibm2) throw UsageError("--format lex is ibm2's lexical table: add --aligner ibm2");
    if (model_path.empty()) throw UsageError("--format lex needs --model: the table is over that model's pieces");
    if (!reverse_model.empty() || symmetrize != Symmetrization::kNone || !eval_gold.empty() || !output_dir.empty() ||
        !heatmap_dir.empty())
      throw UsageError("--format lex writes one table: drop --reverse-model, --symmetrize, --eval-gold, "
                       "--output-dir and --heatmap");
  } else {
    if (ibm2 && format != AlignFormat::kPharaoh)
      throw UsageError("the ibm2 aligner gives hard links only: use --format pharaoh (or lex for its table)");
    if (ibm2 && (!model_path.empty() || !reverse_model.empty()))
      throw UsageError("the ibm2 aligner learns from the text: drop --model and --reverse-model");
  }
  const bool symmetric = symmetrize != Symmetrization::kNone;
  if (!ibm2 && symmetric != !reverse_model.empty())
    throw UsageError("symmetrization needs both a reverse model and a method other than none");
  if (ibm2 && symmetrize == Symmetrization::kAverage)
    throw UsageError("the ibm2 aligner symmetrizes links: average needs attention matrices");
  // The input: --src (with --tgt: forced mode), --tsv or --pairs; with none
  // of them, fast_align pairs on stdin (checked where they are read).
  const int inputs = !src.empty() + !tsv.empty() + !pairs.empty();
  if (inputs > 1) throw UsageError("give one input: --src (and --tgt), --tsv or --pairs");
  if (!tgt.empty() && src.empty()) throw UsageError("option --src is required with --tgt");
  const bool forced = !tgt.empty() || !tsv.empty() || !pairs.empty() || inputs == 0;
  if ((forced || ibm2) && search.beam_size != 1)
    throw UsageError("--beam-size does nothing when the target is given (--tgt, --tsv, --pairs, ibm2): it is for free "
                     "mode (--src alone)");
  if (!forced) {  // free mode: the model translates, so there is no given target
    if (ibm2) throw UsageError("option --tgt is required with --aligner ibm2 (it aligns given pairs)");
    if (!reverse_model.empty()) throw UsageError("option --tgt is required with --reverse-model (forced mode)");
  }
  if (!ibm2 && model_path.empty())
    throw UsageError("option --model (-m) is required: the checkpoint whose attention aligns (or --aligner ibm2, "
                     "which needs none)");
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
