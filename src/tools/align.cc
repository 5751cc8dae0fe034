// nmt-align's pipeline: forced and free attention, one aligner per pair
// (a model's attention or ibm2), and where the results go (see align.h).
#include "tools/align.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/format.h"
#include "base/utf8.h"
#include "base/validate.h"
#include "io/io.h"
#include "model/device.h"
#include "text/corpus.h"

namespace nmt {
namespace {

const std::string kEos = "</s>";

std::vector<std::string> with_eos(std::vector<std::string> pieces) {
  pieces.push_back(kEos);
  return pieces;
}

AttentionMatrix to_matrix(const torch::Tensor& alpha, std::vector<std::string> src, std::vector<std::string> tgt) {
  AttentionMatrix m;
  m.src_tokens = std::move(src);
  m.tgt_tokens = std::move(tgt);
  auto a = alpha.to(torch::kFloat).cpu().contiguous();  // [T, S]
  auto acc = a.accessor<float, 2>();
  for (int64_t t = 0; t < a.size(0); ++t) {
    m.weights.emplace_back(a.size(1));
    for (int64_t j = 0; j < a.size(1); ++j) m.weights.back()[j] = acc[t][j];
  }
  return m;
}

}  // namespace

namespace {

// The model's alignment (alignment head, else attention) of target ids `tgt`
// (no EOS) read as the translation of source ids `src`: [T + 1, S + 1],
// EOS rows and columns included.
torch::Tensor forced_weights(Translator& tr, std::vector<int64_t> src, std::vector<int64_t> tgt) {
  auto& model = tr.model();
  InferenceScope scope({model});
  const auto device = model->parameters().front().device();
  std::vector<Example> ex(1);
  ex[0].src = std::move(src);
  ex[0].tgt = std::move(tgt);
  auto batch = make_batch(ex, {0}).to(device);
  return model->forward_aligned(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out).second[0];  // [T, S]
}

}  // namespace

AttentionMatrix forced_attention(Translator& tr, const std::string& src, const std::string& tgt) {
  if (src.empty() || tgt.empty()) throw Error("forced alignment needs a non-empty source and target");
  auto alpha = forced_weights(tr, tr.encode_source(src), tr.tgt_tokenizer().encode(tgt));
  return to_matrix(alpha, with_eos(tr.src_tokenizer().pieces(src)), with_eos(tr.tgt_tokenizer().pieces(tgt)));
}

AttentionMatrix free_attention(Translator& tr, const std::string& src, const SearchOptions& search,
                               std::string* translation) {
  if (src.empty()) throw Error("alignment needs a non-empty source");
  TranslateOptions opt;
  opt.search = search;
  opt.search.n_best = 1;
  auto hyp = tr.translate({src}, opt, /*with_attention=*/true)[0][0];
  if (translation != nullptr) *translation = tr.detokenize(hyp, src, /*replace_unk=*/false);
  std::vector<std::string> tgt;
  for (int64_t id : hyp.ids) tgt.push_back(tr.tgt_tokenizer().piece(id));
  tgt.push_back(kEos);
  // A model with an alignment head aligns its own translation as it would a given one.
  if (tr.model()->decoder->has_alignment_head())
    return to_matrix(forced_weights(tr, tr.encode_source(src), hyp.ids), with_eos(tr.src_tokenizer().pieces(src)),
                     tgt);
  auto alpha = hyp.attention.narrow(0, 0, std::min<int64_t>(hyp.attention.size(0), tgt.size()));
  tgt.resize(alpha.size(0));
  return to_matrix(alpha, with_eos(tr.src_tokenizer().pieces(src)), tgt);
}

namespace {

// The pairs to align; `tgt` is empty in free mode (the model translates).
struct Pairs {
  std::vector<std::string> src, tgt;
};

// Reads --src (and --tgt), --tsv or --pairs, or with none of them
// fast_align pairs from stdin; at most --max-pairs of them. Throws
// nmt::UsageError when there is no input option and stdin is a terminal,
// nmt::Error for unreadable files or a pair with an empty side.
Pairs read_pairs(const AlignRunOptions& opt) {
  Pairs p;
  const CorpusLimits limits{kAlignMaxLineBytes, false};
  const bool given = !opt.src.empty() || !opt.tsv.empty() || !opt.pairs.empty();
  if (!given && ::isatty(0))
    throw UsageError("nothing to align: give --src (and --tgt for forced mode), --tsv or --pairs, or pipe fast_align's "
                     "'source ||| target' lines into nmt-align");
  if (!opt.tsv.empty() || !given || !opt.pairs.empty()) {
    auto c = !opt.tsv.empty() ? read_tsv(opt.tsv, limits) : read_bar_pairs(given ? opt.pairs : "-", limits);
    if (c.stats.empty) throw Error(c.stats.first_empty + ": a pair with an empty side; every pair must have both");
    p.src = std::move(c.src);
    p.tgt = std::move(c.tgt);
  } else if (opt.tgt.empty()) {
    p.src = read_lines(opt.src, kAlignMaxLineBytes);
  } else {
    auto c = read_parallel(opt.src, opt.tgt, limits);
    if (c.stats.empty) throw Error(c.stats.first_empty + ": empty line; every pair must have both sides");
    p.src = std::move(c.src);
    p.tgt = std::move(c.tgt);
  }
  if (opt.max_pairs > 0 && static_cast<int64_t>(p.src.size()) > opt.max_pairs) {
    p.src.resize(opt.max_pairs);
    if (!p.tgt.empty()) p.tgt.resize(opt.max_pairs);
  }
  return p;
}

// Reads the gold links of the first `pairs` pairs and checks that every link
// lies inside its pair (word counts of src and, when given, tgt). Throws
// nmt::Error located at gold:line.
std::vector<GoldAlignment> read_gold(const AlignRunOptions& opt, const std::vector<std::string>& src,
                                     const std::vector<std::string>& tgt) {
  auto lines = read_lines(opt.eval_gold, kAlignMaxLineBytes);
  if (lines.size() < src.size())
    throw Error(located(opt.eval_gold, 0, std::to_string(lines.size()) + " gold lines for " +
                                             std::to_string(src.size()) + " pairs"));
  std::vector<GoldAlignment> gold;
  for (size_t k = 0; k < src.size(); ++k) {
    const auto line = static_cast<int64_t>(k + 1);
    gold.push_back(parse_gold_line(lines[k], opt.eval_gold, line, opt.gold_one_based));
    const auto ns = static_cast<int>(split_ws(src[k]).size());
    const int nt = tgt.empty() ? INT32_MAX : static_cast<int>(split_ws(tgt[k]).size());
    for (const auto& [i, j] : gold.back().possible)
      if (i >= ns || j >= nt)
        throw Error(located(opt.eval_gold, line, "link " + std::to_string(i + opt.gold_one_based) + "-" +
                                                     std::to_string(j + opt.gold_one_based) + " is outside the pair (" +
                                                     std::to_string(ns) + " source" +
                                                     (tgt.empty() ? "" : " and " + std::to_string(nt) + " target") +
                                                     " words)"));
  }
  return gold;
}

// One pair's alignment: hard links, and the matrix to show (attention only).
struct PairAlignment {
  std::set<Link> links;
  AttentionMatrix shown;
  bool has_matrix = false;  // false for ibm2: links only
  bool free = false;        // the model translated: `translation` is what the links refer to
  std::string translation;
};

// What ibm2 learns from: `pairs`, then --ibm-train-src/-tgt's pairs when
// given. Throws nmt::Error (file and line) when those cannot be read.
Pairs ibm_training_pairs(const AlignRunOptions& opt, const Pairs& pairs) {
  Pairs all = pairs;
  if (opt.ibm_train_src.empty() && opt.ibm_train_tgt.empty()) return all;
  auto extra = read_parallel(opt.ibm_train_src, opt.ibm_train_tgt, CorpusLimits{kAlignMaxLineBytes, false});
  all.src.insert(all.src.end(), std::make_move_iterator(extra.src.begin()), std::make_move_iterator(extra.src.end()));
  all.tgt.insert(all.tgt.end(), std::make_move_iterator(extra.tgt.begin()), std::make_move_iterator(extra.tgt.end()));
  return all;
}

// What aligns one pair; `tgt` is empty in free mode.
class PairAligner {
 public:
  virtual ~PairAligner() = default;
  virtual PairAlignment align(const std::string& src, const std::string& tgt) = 0;
};

// ibm2: learns from the pairs to align plus any extra pairs, in both
// directions when symmetrizing.
class IbmPairAligner : public PairAligner {
 public:
  IbmPairAligner(const AlignRunOptions& opt, const Pairs& pairs) : how_(opt.symmetrize) {
    const Pairs all = ibm_training_pairs(opt, pairs);
    spdlog::info("ibm2: learning from {}, {}", counted(static_cast<int64_t>(all.src.size()), "pair"),
                 counted(opt.ibm.iterations, "iteration"));
    fwd_ = std::make_unique<WordAligner>(WordAligner::train(all.src, all.tgt, opt.ibm));
    if (how_ != Symmetrization::kNone) rev_ = std::make_unique<WordAligner>(WordAligner::train(all.tgt, all.src, opt.ibm));
  }
  PairAlignment align(const std::string& src, const std::string& tgt) override {
    PairAlignment a;
    a.links = fwd_->align(src, tgt);
    if (rev_) a.links = symmetrize(a.links, swap_links(rev_->align(tgt, src)), how_);
    return a;
  }

 private:
  Symmetrization how_;
  std::unique_ptr<WordAligner> fwd_, rev_;
};

// The pieces of a vocabulary, its reserved ones (pad, unk, bos, eos) left out.
std::set<std::string> vocabulary(const Tokenizer& tok) {
  std::set<std::string> out;
  for (int64_t id = kEosId + 1; id < tok.vocab_size(); ++id) out.insert(tok.piece(id));
  return out;
}

// |a and b| / |a or b|: 1 for the same pieces, 0 for none in common.
double shared_share(const std::set<std::string>& a, const std::set<std::string>& b) {
  size_t both = 0;
  for (const auto& p : a) both += b.count(p);
  const size_t either = a.size() + b.size() - both;
  return either == 0 ? 1.0 : static_cast<double>(both) / static_cast<double>(either);
}

// Throws nmt::Error when the model of --reverse-model translates in the
// direction of -m rather than back: its source vocabulary is nearer -m's
// source vocabulary than -m's target one, and its target nearer -m's target.
// (Two models trained apart have vocabularies of their own, so they are
// compared by the pieces they share.) Models with one vocabulary for both
// sides cannot tell the directions apart and pass.
void check_reverse_direction(const AlignRunOptions& opt, const Translator& fwd, const Translator& rev) {
  if (fwd.src_tokenizer().bytes() == fwd.tgt_tokenizer().bytes()) return;
  const auto fs = vocabulary(fwd.src_tokenizer()), ft = vocabulary(fwd.tgt_tokenizer());
  const auto rs = vocabulary(rev.src_tokenizer()), rt = vocabulary(rev.tgt_tokenizer());
  const double src_same = shared_share(rs, fs), src_back = shared_share(rs, ft);
  const double tgt_same = shared_share(rt, ft), tgt_back = shared_share(rt, fs);
  if (!(src_same > src_back && tgt_same > tgt_back)) return;
  const auto pct = [](double x) { return std::to_string(static_cast<int>(std::lround(100 * x))) + "%"; };
  throw Error(located(opt.reverse_model, 0,
                      "translates in the direction of -m " + excerpt(opt.model_path) + ", not back: its source "
                      "vocabulary shares " + pct(src_same) + " of its pieces with -m's source vocabulary and " +
                      pct(src_back) + " with -m's target one; --reverse-model takes the model trained from -m's "
                      "target language to its source language"));
}

// A model's attention, forced (given target) or free, optionally combined
// with a reverse model's.
class AttentionPairAligner : public PairAligner {
 public:
  explicit AttentionPairAligner(const AlignRunOptions& opt) : opt_(opt) {
    const auto device = start_runtime(opt.runtime);
    forward_ = std::make_unique<Translator>(load_checkpoint(opt.model_path, device));
    if (!opt.reverse_model.empty()) {
      reverse_ = std::make_unique<Translator>(load_checkpoint(opt.reverse_model, device));
      check_reverse_direction(opt, *forward_, *reverse_);
    }
  }
  bool has_reverse() const { return reverse_ != nullptr; }
  PairAlignment align(const std::string& src, const std::string& tgt) override {
    PairAlignment a;
    a.free = tgt.empty();
    AttentionMatrix m = a.free ? free_attention(*forward_, src, opt_.search, &a.translation)
                               : forced_attention(*forward_, src, tgt);
    if (opt_.shift > 0) m = shift_rows(m, opt_.shift);
    AttentionMatrix words = merge_to_words(m);
    if (reverse_) {
      // The reverse model reads the target as its source: its rows are our columns.
      const auto rev_words = merge_to_words(shift_rows(forced_attention(*reverse_, tgt, src), opt_.shift));
      if (opt_.symmetrize == Symmetrization::kAverage) {
        words = average_with_reverse(words, rev_words);
        m = words;  // the averaged matrix is what gets shown
        a.links = hard(words);
      } else {
        a.links = symmetrize(hard(words), swap_links(hard(rev_words)), opt_.symmetrize);
      }
    } else {
      a.links = hard(words);
    }
    a.shown = opt_.level == AlignLevel::kWord ? std::move(words) : std::move(m);
    a.has_matrix = true;
    return a;
  }

 private:
  std::set<Link> hard(const AttentionMatrix& words) const { return hard_alignment(words, opt_.method, opt_.threshold); }
  const AlignRunOptions& opt_;
  std::unique_ptr<Translator> forward_, reverse_;
};

// Where alignments go: one stream (stdout or -o) unless everything goes
// into --output-dir, plus per-pair files in --output-dir and --heatmap.
// Nothing replaces the stream's file before commit().
class AlignmentSink {
 public:
  explicit AlignmentSink(const AlignRunOptions& opt) : opt_(opt) {
    for (const auto& dir : {opt.output_dir, opt.heatmap_dir}) {
      if (dir.empty()) continue;
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) throw Error(located(dir, 0, "cannot create folder: " + ec.message()));
      remove_stale_temporaries(dir);
    }
    if (opt.output_dir.empty() || opt.format == AlignFormat::kPharaoh) out_ = std::make_unique<OutputFile>(opt.output);
    // A tidy table has its header even when there are no pairs.
    if (out_ && opt.format == AlignFormat::kTidy) write_tidy_csv(out_->stream(), AttentionMatrix{}, 0, true);
  }
  void write(size_t k, const PairAlignment& a) {
    if (!opt_.heatmap_dir.empty() && a.has_matrix)
      write_file(numbered(opt_.heatmap_dir, k, ".svg"), svg(a.shown, heatmap_title(k, a)));
    switch (opt_.format) {
      case AlignFormat::kPharaoh:  // free mode: "translation ||| links", as marian-decoder --alignment
        if (a.free) out_->stream() << a.translation << " ||| ";
        out_->stream() << to_pharaoh(a.links) << '\n';
        break;
      case AlignFormat::kTidy:
        if (!opt_.output_dir.empty()) {
          std::ostringstream csv;
          write_tidy_csv(csv, a.shown, k, /*header=*/true);
          write_file(numbered(opt_.output_dir, k, ".csv"), csv.str());
        } else {
          write_tidy_csv(out_->stream(), a.shown, k, /*header=*/false);
        }
        break;
      case AlignFormat::kSvg:
        if (!opt_.output_dir.empty()) write_file(numbered(opt_.output_dir, k, ".svg"), svg(a.shown, heatmap_title(k, a)));
        break;
      case AlignFormat::kLex:  // one table for the whole corpus (write_lexical_table), nothing per pair
        break;
      case AlignFormat::kCsv:
        if (!opt_.output_dir.empty()) {
          std::ostringstream csv;
          write_csv(csv, a.shown);
          write_file(numbered(opt_.output_dir, k, ".csv"), csv.str());
        } else {
          if (k > 0) out_->stream() << '\n';  // blocks are separated by one empty line
          write_csv(out_->stream(), a.shown);
        }
        break;
    }
  }
  // Replaces the output file, then removes the per-pair files an earlier,
  // longer run left in --output-dir and --heatmap beyond the `pairs` this run
  // wrote, so that the folder holds this run's pairs alone.
  void commit(size_t pairs) {
    if (out_) out_->commit();
    const bool per_pair = !opt_.output_dir.empty() && (opt_.format == AlignFormat::kCsv ||
                                                       opt_.format == AlignFormat::kTidy || opt_.format == AlignFormat::kSvg);
    if (per_pair) remove_stale(opt_.output_dir, opt_.format == AlignFormat::kSvg ? ".svg" : ".csv", pairs);
    if (!opt_.heatmap_dir.empty()) remove_stale(opt_.heatmap_dir, ".svg", pairs);
  }

 private:
  static std::string numbered(const std::string& dir, size_t k, const char* ext) {
    std::ostringstream name;
    name << dir << '/' << std::setw(4) << std::setfill('0') << k + 1 << ext;
    return name.str();
  }
  // The pair number of a file name numbered() writes with `ext` ("0012.csv":
  // 12), or 0 for any other name ("12.csv", "0012 (copy).csv", "notes.csv").
  static uint64_t pair_number(const std::string& name, const std::string& ext) {
    if (name.size() <= ext.size() || name.compare(name.size() - ext.size(), ext.size(), ext) != 0) return 0;
    const std::string stem = name.substr(0, name.size() - ext.size());
    uint64_t k = 0;
    const auto [end, ec] = std::from_chars(stem.data(), stem.data() + stem.size(), k);
    if (ec != std::errc() || end != stem.data() + stem.size() || k == 0) return 0;
    std::ostringstream again;
    again << std::setw(4) << std::setfill('0') << k;
    return again.str() == stem ? k : 0;
  }
  // Removes the regular files of `dir` named as pairs after the first `pairs`
  // (never links, folders or other names), and says so. Never throws.
  static void remove_stale(const std::string& dir, const std::string& ext, size_t pairs) {
    std::vector<std::pair<uint64_t, std::string>> stale;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      const uint64_t k = pair_number(name, ext);
      std::error_code type_ec;
      if (k > pairs && it->symlink_status(type_ec).type() == std::filesystem::file_type::regular)
        stale.emplace_back(k, name);
    }
    if (stale.empty()) return;
    std::sort(stale.begin(), stale.end());
    int64_t removed = 0;
    for (const auto& [k, name] : stale) removed += std::filesystem::remove(dir + "/" + name, ec) ? 1 : 0;
    spdlog::info("{}: removed {} of an earlier, longer run ({} .. {}); the folder holds the {} of this run", dir,
                 counted(removed, "per-pair file"), stale.front().second, stale.back().second,
                 counted(static_cast<int64_t>(pairs), "pair"));
  }
  static std::string svg(const AttentionMatrix& m, const std::string& title) {
    std::ostringstream s;
    write_svg(s, m, title);
    return s.str();
  }
  // The title of pair k's heatmap: its number (as in its file name), forced
  // or free, word or piece level, and the model's file name, e.g.
  // "pair 3 · forced · word level · best.ckpt".
  std::string heatmap_title(size_t k, const PairAlignment& a) const {
    const char* dot = " \u00b7 ";
    const bool average = opt_.symmetrize == Symmetrization::kAverage;  // a word-level matrix of both models
    std::string t = "pair " + std::to_string(k + 1) + dot + (a.free ? "free (the model's translation)" : "forced") +
                    dot + (opt_.level == AlignLevel::kWord || average ? "word" : "piece") + " level" + dot +
                    std::filesystem::path(opt_.model_path).filename().string();
    if (average) t += " averaged with " + std::filesystem::path(opt_.reverse_model).filename().string();
    return t;
  }
  static void write_file(const std::string& path, const std::string& text) {
    OutputFile f(path, /*sweep_stale=*/false);  // the folder was swept when the sink opened
    f.stream() << text;
    f.commit();
  }
  const AlignRunOptions& opt_;
  std::unique_ptr<OutputFile> out_;
};

// --format lex: ibm2 trained on the pairs (and --ibm-train-src/-tgt) cut
// into --model's pieces; its lexical table goes to --output as
// "source_piece<TAB>target_piece<TAB>t(f|e)" lines, each source piece's
// --lex-best most probable targets first (what nmt-translate --shortlist reads).
void write_lexical_table(const AlignRunOptions& opt, const Pairs& pairs) {
  const LoadedModel m = load_checkpoint(opt.model_path, torch::kCPU);
  const Pairs all = ibm_training_pairs(opt, pairs);
  auto joined = [](const std::vector<std::string>& pieces) {
    std::string out;
    for (const auto& p : pieces) out += (out.empty() ? "" : " ") + p;
    return out;
  };
  std::vector<std::string> src, tgt;
  for (size_t k = 0; k < all.src.size(); ++k) {
    src.push_back(joined(m.src_tok.pieces(all.src[k])));
    tgt.push_back(joined(m.tgt_tok.pieces(all.tgt[k])));
  }
  spdlog::info("ibm2: learning a lexical table from {} of pieces, {}", counted(static_cast<int64_t>(src.size()), "pair"),
               counted(opt.ibm.iterations, "iteration"));
  const auto table = WordAligner::train(src, tgt, opt.ibm).lexical_table(static_cast<size_t>(opt.lex_best), 0.0);
  OutputFile out(opt.output);
  for (const auto& e : table) out.stream() << e.source << '\t' << e.target << '\t' << fmt::format("{:.6g}", e.prob) << '\n';
  out.commit();
  spdlog::info("lexical table: {} written", counted(static_cast<int64_t>(table.size()), "entry", "entries"));
}

}  // namespace

AerScore run_alignment(const AlignRunOptions& opt) {
  opt.validate();  // -m, and the target where the mode needs one, are there
  const bool ibm = opt.aligner == Aligner::kIbm2;
  std::unique_ptr<AttentionPairAligner> attention;
  if (ibm) {
    set_threads(opt.runtime.threads);
  } else {
    attention = std::make_unique<AttentionPairAligner>(opt);
  }
  const Pairs pairs = read_pairs(opt);
  if (opt.format == AlignFormat::kLex) {
    write_lexical_table(opt, pairs);
    return AerScore{};
  }
  std::unique_ptr<PairAligner> aligner;
  if (ibm) {
    aligner = std::make_unique<IbmPairAligner>(opt, pairs);
  } else {
    aligner = std::move(attention);
  }
  std::vector<GoldAlignment> gold;
  if (!opt.eval_gold.empty()) gold = read_gold(opt, pairs.src, pairs.tgt);
  AlignmentSink sink(opt);
  std::vector<std::set<Link>> hard;
  for (size_t k = 0; k < pairs.src.size(); ++k) {
    const auto a = aligner->align(pairs.src[k], pairs.tgt.empty() ? std::string() : pairs.tgt[k]);
    if (!gold.empty()) hard.push_back(a.links);
    sink.write(k, a);
  }
  sink.commit(pairs.src.size());
  AerScore score;
  if (!gold.empty()) {
    score = alignment_error_rate(hard, gold);
    spdlog::info("alignment vs {}: precision {:.4f} recall {:.4f} AER {:.4f} ({}, {}, {})", opt.eval_gold,
                 score.precision(), score.recall(), score.aer(), counted(score.hyp, "link"),
                 counted(score.sure, "sure gold link"), counted(static_cast<int64_t>(hard.size()), "pair"));
  }
  return score;
}

}  // namespace nmt
