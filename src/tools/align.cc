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
#include <functional>
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

namespace {

// The first `max_pieces` pieces (0: all) of `text` by `tok`, as ids and as strings.
void encode_cropped(const Tokenizer& tok, const std::string& text, int64_t max_pieces, std::vector<int64_t>* ids,
                    std::vector<std::string>* pieces) {
  *ids = tok.encode(text);
  *pieces = tok.pieces(text);
  if (max_pieces > 0 && static_cast<int64_t>(ids->size()) > max_pieces) ids->resize(max_pieces);
  if (max_pieces > 0 && static_cast<int64_t>(pieces->size()) > max_pieces) pieces->resize(max_pieces);
}

}  // namespace

AttentionMatrix forced_attention(Translator& tr, const std::string& src, const std::string& tgt, int64_t max_pieces) {
  if (src.empty() || tgt.empty()) throw Error("forced alignment needs a non-empty source and target");
  std::vector<int64_t> src_ids, tgt_ids;
  std::vector<std::string> src_pieces, tgt_pieces;
  encode_cropped(tr.src_tokenizer(), src, max_pieces, &src_ids, &src_pieces);
  encode_cropped(tr.tgt_tokenizer(), tgt, max_pieces, &tgt_ids, &tgt_pieces);
  src_ids.push_back(kEosId);
  auto alpha = forced_weights(tr, std::move(src_ids), std::move(tgt_ids));
  return to_matrix(alpha, with_eos(std::move(src_pieces)), with_eos(std::move(tgt_pieces)));
}

AttentionMatrix free_attention(Translator& tr, const std::string& src, const SearchOptions& search,
                               std::string* translation, int64_t max_pieces) {
  if (src.empty()) throw Error("alignment needs a non-empty source");
  TranslateOptions opt;
  opt.search = search;
  opt.search.n_best = 1;
  opt.max_input_length = max_pieces;  // the translator crops the source as encode_cropped() does
  auto hyp = tr.translate({src}, opt, /*with_attention=*/true)[0][0];
  if (translation != nullptr) *translation = tr.detokenize(hyp, src, /*replace_unk=*/false);
  std::vector<int64_t> src_ids;
  std::vector<std::string> src_pieces;
  encode_cropped(tr.src_tokenizer(), src, max_pieces, &src_ids, &src_pieces);
  src_ids.push_back(kEosId);
  std::vector<std::string> tgt;
  for (int64_t id : hyp.ids) tgt.push_back(tr.tgt_tokenizer().piece(id));
  tgt.push_back(kEos);
  // A model with an alignment head aligns its own translation as it would a given one.
  if (tr.model()->decoder->has_alignment_head())
    return to_matrix(forced_weights(tr, std::move(src_ids), hyp.ids), with_eos(std::move(src_pieces)), tgt);
  auto alpha = hyp.attention.narrow(0, 0, std::min<int64_t>(hyp.attention.size(0), tgt.size()));
  tgt.resize(alpha.size(0));
  return to_matrix(alpha, with_eos(std::move(src_pieces)), tgt);
}

bool crop_to_whole_words(std::string* text, const std::vector<const Tokenizer*>& tokenizers, int64_t max_pieces) {
  if (max_pieces <= 0) return false;
  int64_t words = INT64_MAX;  // whole words that fit every tokenizer's limit
  for (const Tokenizer* tok : tokenizers) {
    const auto pieces = tok->pieces(*text);
    if (static_cast<int64_t>(pieces.size()) <= max_pieces) continue;
    // Piece max_pieces (0-based) is the first one left out: the words before its word are whole.
    words = std::min<int64_t>(words, piece_words(pieces)[static_cast<size_t>(max_pieces)]);
  }
  if (words == INT64_MAX) return false;
  words = std::max<int64_t>(words, 1);  // a first word longer than the limit: its first pieces
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  size_t i = 0;
  for (int64_t w = 0; w < words && i < text->size(); ++w) {
    while (i < text->size() && space((*text)[i])) ++i;
    while (i < text->size() && !space((*text)[i])) ++i;
  }
  text->resize(i);
  return true;
}

namespace {

// The pairs to align; `tgt` is empty in free mode (the model translates).
struct Pairs {
  std::vector<std::string> src, tgt;
};

// The pairs to align, read one at a time: --src (and --tgt), --tsv or
// --pairs, or with none of them fast_align pairs from stdin; at most
// --max-pairs of them. Only the current line is held.
class PairInput {
 public:
  // Throws nmt::UsageError when there is no input option and stdin is a
  // terminal, nmt::Error for a file that cannot be opened.
  explicit PairInput(const AlignRunOptions& opt) : max_pairs_(opt.max_pairs) {
    const CorpusLimits limits{kAlignMaxLineBytes, false};
    const bool given = !opt.src.empty() || !opt.tsv.empty() || !opt.pairs.empty();
    if (!given && ::isatty(0))
      throw UsageError("nothing to align: give --src (and --tgt for forced mode), --tsv or --pairs, or pipe "
                       "fast_align's 'source ||| target' lines into nmt-align");
    if (!opt.tsv.empty()) {
      pairs_ = std::make_unique<PairReader>(PairReader::tsv(opt.tsv, limits));
    } else if (!given || !opt.pairs.empty()) {
      pairs_ = std::make_unique<PairReader>(PairReader::bar_pairs(given ? opt.pairs : "-", limits));
    } else if (opt.tgt.empty()) {
      lines_ = std::make_unique<LineReader>(opt.src, kAlignMaxLineBytes);
    } else {
      pairs_ = std::make_unique<PairReader>(PairReader::parallel(opt.src, opt.tgt, limits));
      two_files_ = true;
    }
  }

  // The next pair into *src and *tgt (empty in free mode: the model
  // translates); false after the last one. Throws nmt::Error located at
  // file:line for a line that is not valid text or longer than
  // kAlignMaxLineBytes, files of different line counts, or a pair with an
  // empty side.
  bool next(std::string* src, std::string* tgt) {
    if (max_pairs_ > 0 && count_ >= max_pairs_) return false;
    if (lines_) {
      std::string raw;
      bool too_long = false;
      if (!lines_->next(&raw, &too_long)) return false;
      if (too_long) throw Error(located(lines_->name(), lines_->line(), over_long()));
      *src = checked_line(raw, lines_->name(), lines_->line());
      tgt->clear();
    } else {
      PairReader::Pair p;
      if (!pairs_->next(&p)) return false;
      if (!p.over_long.empty()) throw Error(located(p.over_long, p.line, over_long()));
      if (p.src.empty() || p.tgt.empty())
        throw Error((p.src.empty() ? pairs_->src_name() : pairs_->tgt_name()) + ":" + std::to_string(p.line) +
                    (two_files_ ? ": empty line; every pair must have both sides"
                                : ": a pair with an empty side; every pair must have both"));
      *src = std::move(p.src);
      *tgt = std::move(p.tgt);
    }
    ++count_;
    return true;
  }

 private:
  static std::string over_long() { return "line is longer than " + std::to_string(kAlignMaxLineBytes) + " bytes"; }
  int64_t max_pairs_ = 0, count_ = 0;
  std::unique_ptr<PairReader> pairs_;
  std::unique_ptr<LineReader> lines_;  // free mode: sources alone
  bool two_files_ = false;
};

// Every pair of `in` (what ibm2 learns from).
Pairs read_all_pairs(PairInput& in) {
  Pairs p;
  std::string src, tgt;
  while (in.next(&src, &tgt)) {
    p.src.push_back(std::move(src));
    if (!tgt.empty()) p.tgt.push_back(std::move(tgt));
  }
  return p;
}

// The gold links of --eval-gold, line k for pair k, read along with the
// pairs: the score sums their counts pair by pair.
class GoldInput {
 public:
  // Throws nmt::Error naming the file when it cannot be opened.
  explicit GoldInput(const AlignRunOptions& opt) : opt_(opt), in_(opt.eval_gold, kAlignMaxLineBytes) {}

  // The gold links of the next pair (`src`, and `tgt` unless empty in free
  // mode), checked to lie inside it; with no line left for it, `pairs`
  // (called then) counts the pairs in all. Throws nmt::Error located at
  // gold:line.
  GoldAlignment next(const std::string& src, const std::string& tgt, const std::function<int64_t()>& pairs) {
    std::string raw;
    bool too_long = false;
    if (!in_.next(&raw, &too_long))
      throw Error(located(opt_.eval_gold, 0, std::to_string(in_.line()) + " gold lines for " +
                                                std::to_string(pairs()) + " pairs"));
    const int64_t line = in_.line();
    if (too_long)
      throw Error(located(in_.name(), line, "line is longer than " + std::to_string(kAlignMaxLineBytes) + " bytes"));
    GoldAlignment gold = parse_gold_line(checked_line(raw, in_.name(), line), opt_.eval_gold, line, opt_.gold_one_based);
    const auto ns = static_cast<int>(split_ws(src).size());
    const int nt = tgt.empty() ? INT32_MAX : static_cast<int>(split_ws(tgt).size());
    for (const auto& [i, j] : gold.possible)
      if (i >= ns || j >= nt)
        throw Error(located(opt_.eval_gold, line, "link " + std::to_string(i + opt_.gold_one_based) + "-" +
                                                      std::to_string(j + opt_.gold_one_based) + " is outside the pair (" +
                                                      std::to_string(ns) + " source" +
                                                      (tgt.empty() ? "" : " and " + std::to_string(nt) + " target") +
                                                      " words)"));
    return gold;
  }

 private:
  const AlignRunOptions& opt_;
  LineReader in_;
};

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
  // Pairs with a side cut to --max-input-length so far.
  int64_t cropped() const { return cropped_; }
  PairAlignment align(const std::string& given_src, const std::string& given_tgt) override {
    PairAlignment a;
    a.free = given_tgt.empty();
    // Each side cut to whole words within --max-input-length pieces of every
    // model that reads it, so that both models see the same words.
    const int64_t max = opt_.max_input_length;
    std::string src = given_src, tgt = given_tgt;
    std::vector<const Tokenizer*> src_toks{&forward_->src_tokenizer()}, tgt_toks{&forward_->tgt_tokenizer()};
    if (reverse_) {
      src_toks.push_back(&reverse_->tgt_tokenizer());
      tgt_toks.push_back(&reverse_->src_tokenizer());
    }
    const bool cut_src = crop_to_whole_words(&src, src_toks, max);
    const bool cut_tgt = !a.free && crop_to_whole_words(&tgt, tgt_toks, max);
    if (cut_src || cut_tgt) ++cropped_;
    AttentionMatrix m = a.free ? free_attention(*forward_, src, opt_.search, &a.translation, max)
                               : forced_attention(*forward_, src, tgt, max);
    if (opt_.shift > 0) m = shift_rows(m, opt_.shift);
    AttentionMatrix words = merge_to_words(m);
    if (reverse_) {
      // The reverse model reads the target as its source: its rows are our columns.
      const auto rev_words = merge_to_words(shift_rows(forced_attention(*reverse_, tgt, src, max), opt_.shift));
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
  int64_t cropped_ = 0;
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
      write_file(numbered(opt_.heatmap_dir, k, ".svg"), [&](std::ostream& o) { write_svg(o, a.shown, heatmap_title(k, a)); });
    switch (opt_.format) {
      case AlignFormat::kPharaoh:  // free mode: "translation ||| links", as marian-decoder --alignment
        if (a.free) out_->stream() << a.translation << " ||| ";
        out_->stream() << to_pharaoh(a.links) << '\n';
        break;
      case AlignFormat::kTidy:
        if (!opt_.output_dir.empty()) {
          write_file(numbered(opt_.output_dir, k, ".csv"),
                     [&](std::ostream& o) { write_tidy_csv(o, a.shown, k, /*header=*/true); });
        } else {
          write_tidy_csv(out_->stream(), a.shown, k, /*header=*/false);
        }
        break;
      case AlignFormat::kSvg:
        if (!opt_.output_dir.empty())
          write_file(numbered(opt_.output_dir, k, ".svg"), [&](std::ostream& o) { write_svg(o, a.shown, heatmap_title(k, a)); });
        break;
      case AlignFormat::kLex:  // one table for the whole corpus (write_lexical_table), nothing per pair
        break;
      case AlignFormat::kCsv:
        if (!opt_.output_dir.empty()) {
          write_file(numbered(opt_.output_dir, k, ".csv"), [&](std::ostream& o) { write_csv(o, a.shown); });
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
  // Writes one per-pair file through `write`, straight into the file.
  static void write_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
    OutputFile f(path, /*sweep_stale=*/false);  // the folder was swept when the sink opened
    write(f.stream());
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
  PairInput input(opt);
  // ibm2 learns from every pair before it aligns any: it holds them all. The
  // attention aligner reads, aligns and writes one pair at a time.
  std::unique_ptr<Pairs> all;
  std::unique_ptr<PairAligner> aligner;
  if (ibm) {
    all = std::make_unique<Pairs>(read_all_pairs(input));
    if (opt.format == AlignFormat::kLex) {
      write_lexical_table(opt, *all);
      return AerScore{};
    }
    aligner = std::make_unique<IbmPairAligner>(opt, *all);
  } else {
    aligner = std::move(attention);
  }
  const AttentionPairAligner* cropping = ibm ? nullptr : static_cast<const AttentionPairAligner*>(aligner.get());
  size_t k = 0;  // pairs read so far
  auto next = [&](std::string* src, std::string* tgt) {
    if (!all) return input.next(src, tgt);
    if (k >= all->src.size()) return false;
    *src = all->src[k];
    *tgt = all->tgt.empty() ? std::string() : all->tgt[k];
    return true;
  };
  std::unique_ptr<GoldInput> gold;
  if (!opt.eval_gold.empty()) gold = std::make_unique<GoldInput>(opt);
  std::unique_ptr<AlignmentSink> sink;  // opened once the first pair is aligned (or at the end, for none)
  AerScore score;
  std::string src, tgt;
  while (next(&src, &tgt)) {
    GoldAlignment g;
    if (gold) {
      g = gold->next(src, tgt, [&] {  // the gold file ends early: count every pair, to say so
        int64_t n = static_cast<int64_t>(k) + 1;
        std::string s, t;
        for (++k; next(&s, &t); ++k) ++n;
        return n;
      });
    }
    const auto a = aligner->align(src, tgt);
    if (gold) {
      const AerScore one = alignment_error_rate({a.links}, {g});
      score.hyp += one.hyp;
      score.sure += one.sure;
      score.hyp_sure += one.hyp_sure;
      score.hyp_possible += one.hyp_possible;
    }
    if (!sink) sink = std::make_unique<AlignmentSink>(opt);
    sink->write(k, a);
    ++k;
  }
  if (!sink) sink = std::make_unique<AlignmentSink>(opt);
  sink->commit(k);
  if (cropping != nullptr && cropping->cropped() > 0)
    spdlog::warn("{} with a side longer than {} pieces {} cropped (--max-input-length)",
                 counted(cropping->cropped(), "pair"), opt.max_input_length, cropping->cropped() == 1 ? "was" : "were");
  if (gold && k > 0)
    spdlog::info("alignment vs {}: precision {:.4f} recall {:.4f} AER {:.4f} ({}, {}, {})", opt.eval_gold,
                 score.precision(), score.recall(), score.aer(), counted(score.hyp, "link"),
                 counted(score.sure, "sure gold link"), counted(static_cast<int64_t>(k), "pair"));
  return score;
}

}  // namespace nmt
