// The checks of nmt-train's options (train_options.h) that are not plain
// ranges: the ranges come from the field lists, through check_ranges().
#include "base/train_options.h"

#include <utility>

#include "base/check_ranges.h"
#include "base/error.h"
#include "base/format.h"

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

void TokenizerOptions::validate() const {
  if (model_type != "unigram" && model_type != "bpe")
    throw UsageError("--spm-type must be unigram or bpe, got '" + excerpt(model_type) + "'");
  check_ranges(*this);
  if (!tgt_model.empty() && src_model.empty())
    throw UsageError("--tgt-spm needs --src-spm too (or give neither and the tokenizers are trained)");
}

void DistributedOptions::validate() const {
  check_ranges(*this);
  if (rank < 0 || rank >= world_size)
    throw UsageError("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(world_size - 1) +
                " (--rank must be below --world-size " + std::to_string(world_size) + ")");
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
  check_ranges(*this);  // runtime's and dist's fields included
  // An option that only tunes another, set (to other than its default: a
  // run's config.toml lists every option) while that other is off.
  const TrainOptions d;
  const auto refuse_unused = [](const char* option, double value, double fallback, const std::string& needs) {
    throw UsageError(std::string(option) + " " + shortest_decimal(value) + " takes effect only " + needs +
                     ": give that, or leave " + option + " at its default (" + shortest_decimal(fallback) + ")");
  };
  if (kd_teachers.empty() && kd_weight != d.kd_weight)
    refuse_unused("--kd-weight", kd_weight, d.kd_weight, "with --kd-teachers");
  if (guided_alignment.empty() && guided_alignment_weight != d.guided_alignment_weight)
    refuse_unused("--guided-alignment-weight", guided_alignment_weight, d.guided_alignment_weight,
                  "with --guided-alignment");
  if (spm_alpha == 0 && spm_nbest != d.spm_nbest)
    refuse_unused("--spm-nbest", static_cast<double>(spm_nbest), static_cast<double>(d.spm_nbest),
                  "with --spm-alpha above 0");
  const std::string adam = std::string("with --optimizer adam (it is ") + to_string(optimizer) + ")";
  if (optimizer != OptimizerType::kAdam && adam_beta1 != d.adam_beta1)
    refuse_unused("--adam-beta1", adam_beta1, d.adam_beta1, adam);
  if (optimizer != OptimizerType::kAdam && adam_beta2 != d.adam_beta2)
    refuse_unused("--adam-beta2", adam_beta2, d.adam_beta2, adam);
  if (spm_alpha > 0 && !guided_alignment.empty())
    throw UsageError("--spm-alpha cannot be combined with --guided-alignment (its links are per piece of one segmentation)");
  if (!kd_teachers.empty() && r_drop > 0)
    throw UsageError("--kd-teachers cannot be combined with --r-drop (choose one of the two losses)");
  if (!kd_teachers.empty() && cuda_graphs)
    throw UsageError("--kd-teachers cannot be combined with --cuda-graphs (the captured step has no teachers)");
  for (const auto& t : kd_teachers)
    if (t.empty()) throw UsageError("--kd-teachers: an empty path");
  if (average > keep_checkpoints)
    throw UsageError("--average " + std::to_string(average) + " needs --keep-checkpoints of at least " +
                std::to_string(average) + " (it is " + std::to_string(keep_checkpoints) + ")");
  runtime.validate();
  if (output_dir.empty()) throw UsageError("--output must name a folder");
  dist.validate();
  require_pair_files("train", "training", train_src, train_tgt, train_tsv, /*required=*/true);
  require_pair_files("valid", "validation", valid_src, valid_tgt, valid_tsv, /*required=*/false);
}

std::vector<std::string> TrainOptions::unused_without_validation() const {
  if (!valid_src.empty() || !valid_tgt.empty() || !valid_tsv.empty()) return {};
  const TrainOptions d;
  std::vector<std::string> out;
  const auto note = [&](const char* option, bool differs) {
    if (differs) out.push_back(option);
  };
  note("--early-stopping", early_stopping != d.early_stopping);
  note("--lr-patience", lr_patience != d.lr_patience);
  note("--stop-metric", stop_metric != d.stop_metric);
  note("--valid-max-sentences", valid_max_sentences != d.valid_max_sentences);
  note("--valid-batch-sentences", valid_batch_sentences != d.valid_batch_sentences);
  note("--valid-bleu-tokenize", valid_bleu_tokenize != d.valid_bleu_tokenize);
  note("--valid-bleu-lowercase", valid_bleu_lowercase != d.valid_bleu_lowercase);
  // (the rate also decays at epoch ends with --lr-decay-start, validations or not)
  note("--lr-decay", lr_decay_start == 0 && lr_decay != d.lr_decay);
  note("--min-lr", lr_decay_start == 0 && min_lr != d.min_lr);
  return out;
}

}  // namespace nmt
