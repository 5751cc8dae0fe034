// Attention matrices, word merging, hard alignments, AER, CSV and SVG.
#include "align.h"

#include <c10/core/InferenceMode.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <sstream>

#include "corpus.h"
#include "device.h"
#include "error.h"
#include "io.h"
#include "utf8.h"
#include "validate.h"

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

AttentionMatrix forced_attention(Translator& tr, const std::string& src, const std::string& tgt) {
  if (src.empty() || tgt.empty()) throw Error("forced alignment needs a non-empty source and target");
  auto& model = tr.model();
  const bool was_training = model->is_training();
  model->eval();
  c10::InferenceMode guard;
  const auto device = model->parameters().front().device();
  std::vector<Example> ex(1);
  ex[0].src = tr.encode_source(src);
  ex[0].tgt = tr.tgt_tokenizer().encode(tgt);
  auto batch = make_batch(ex, {0}).to(device);
  torch::Tensor alpha;
  model->forward(batch.src, batch.src_len, batch.tgt_in, &alpha);  // alpha [1, T, S]
  if (was_training) model->train();
  return to_matrix(alpha[0], with_eos(tr.src_tokenizer().pieces(src)), with_eos(tr.tgt_tokenizer().pieces(tgt)));
}

AttentionMatrix free_attention(Translator& tr, const std::string& src, const SearchOptions& search) {
  if (src.empty()) throw Error("alignment needs a non-empty source");
  TranslateOptions opt;
  opt.search = search;
  opt.search.n_best = 1;
  auto hyp = tr.translate({src}, opt, /*with_attention=*/true)[0][0];
  std::vector<std::string> tgt;
  for (int64_t id : hyp.ids) tgt.push_back(tr.tgt_tokenizer().piece(id));
  tgt.push_back(kEos);
  auto alpha = hyp.attention.narrow(0, 0, std::min<int64_t>(hyp.attention.size(0), tgt.size()));
  tgt.resize(alpha.size(0));
  return to_matrix(alpha, with_eos(tr.src_tokenizer().pieces(src)), tgt);
}

void AlignRunOptions::validate() const {
  check::in_range("--threshold", threshold, 0.0, 1.0);
  check::in_range("--shift", shift, 0, 4);
  check::in_range("--max-pairs", max_pairs, 0);
  check::in_range("--threads", threads, 0, kMaxThreads);
  ibm.validate();
  search.validate();
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

AerScore run_alignment(const AlignRunOptions& opt) {
  opt.validate();
  if (opt.format != "csv" && opt.format != "pharaoh" && opt.format != "svg")
    throw Error("unknown format '" + opt.format + "' (expected csv, pharaoh or svg)");
  if (opt.level != "subword" && opt.level != "word")
    throw Error("unknown level '" + opt.level + "' (expected subword or word)");
  if (opt.format == "svg" && opt.output_dir.empty() && opt.heatmap_dir.empty())
    throw Error("--format svg writes one file per pair: give --output-dir");
  const bool ibm = opt.aligner == "ibm2";
  if (!ibm && opt.aligner != "attention") throw Error("unknown aligner '" + opt.aligner + "' (expected attention or ibm2)");
  if (ibm && opt.format != "pharaoh") throw Error("the ibm2 aligner gives hard links only: use --format pharaoh");
  if (ibm && (!opt.model_path.empty() || !opt.reverse_model.empty()))
    throw Error("the ibm2 aligner learns from the text: drop --model and --reverse-model");
  if (!ibm && opt.model_path.empty()) throw Error("give a model (--model) to align with its attention");
  const bool symmetric = opt.symmetrize != Symmetrization::kNone;
  if (!ibm && symmetric != !opt.reverse_model.empty())
    throw Error("symmetrization needs both a reverse model and a method other than none");
  if (ibm && opt.symmetrize == Symmetrization::kAverage)
    throw Error("the ibm2 aligner symmetrizes links: average needs attention matrices");
  set_threads(opt.threads);
  std::unique_ptr<Translator> forward, reverse;
  if (!ibm) forward = std::make_unique<Translator>(load_checkpoint(opt.model_path, resolve_device(opt.device)));
  if (!opt.reverse_model.empty()) reverse = std::make_unique<Translator>(load_checkpoint(opt.reverse_model, resolve_device(opt.device)));
  std::vector<std::string> src, tgt;
  if (!opt.tsv.empty()) {
    if (!opt.src.empty() || !opt.tgt.empty()) throw Error("give --tsv or --src/--tgt, not both");
    auto c = read_tsv(opt.tsv, CorpusLimits{kAlignMaxLineBytes, false});
    if (c.stats.empty) throw Error(c.stats.first_empty + ": a pair with an empty side; every pair must have both");
    src = std::move(c.src);
    tgt = std::move(c.tgt);
  } else if (!opt.src.empty()) {
    if (opt.tgt.empty()) {
      src = read_lines(opt.src, kAlignMaxLineBytes);
    } else {
      auto c = read_parallel(opt.src, opt.tgt, CorpusLimits{kAlignMaxLineBytes, false});
      if (c.stats.empty) throw Error(c.stats.first_empty + ": empty line; every pair must have both sides");
      src = std::move(c.src);
      tgt = std::move(c.tgt);
    }
  } else {
    throw Error("nothing to align: give --src (and --tgt for forced mode) or --tsv");
  }
  if (opt.max_pairs > 0 && static_cast<int64_t>(src.size()) > opt.max_pairs) {
    src.resize(opt.max_pairs);
    if (!tgt.empty()) tgt.resize(opt.max_pairs);
  }
  if (reverse && tgt.empty()) throw Error("a reverse model needs forced mode: give the target sentences too");
  if (ibm && tgt.empty()) throw Error("the ibm2 aligner needs the target sentences too");
  std::unique_ptr<WordAligner> ibm_fwd, ibm_rev;
  if (ibm) {
    // Learns from the pairs to align plus any extra pairs, in both directions when symmetrizing.
    std::vector<std::string> all_src = src, all_tgt = tgt;
    if (!opt.ibm_train_src.empty() || !opt.ibm_train_tgt.empty()) {
      auto extra = read_parallel(opt.ibm_train_src, opt.ibm_train_tgt, CorpusLimits{kAlignMaxLineBytes, false});
      all_src.insert(all_src.end(), extra.src.begin(), extra.src.end());
      all_tgt.insert(all_tgt.end(), extra.tgt.begin(), extra.tgt.end());
    }
    spdlog::info("ibm2: learning from {} pairs, {} iterations", all_src.size(), opt.ibm.iterations);
    ibm_fwd = std::make_unique<WordAligner>(WordAligner::train(all_src, all_tgt, opt.ibm));
    if (symmetric) ibm_rev = std::make_unique<WordAligner>(WordAligner::train(all_tgt, all_src, opt.ibm));
  }
  std::vector<GoldAlignment> gold;
  if (!opt.eval_gold.empty()) gold = read_gold(opt, src, tgt);
  for (const auto& dir : {opt.output_dir, opt.heatmap_dir}) {
    if (dir.empty()) continue;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error(located(dir, 0, "cannot create folder: " + ec.message()));
    remove_stale_temporaries(dir);
  }
  // One stream (stdout or -o), unless everything goes into --output-dir.
  std::unique_ptr<OutputFile> out_file;
  if (opt.output_dir.empty() || opt.format == "pharaoh") out_file = std::make_unique<OutputFile>(opt.output);
  std::ostringstream discard;
  std::ostream& out = out_file ? out_file->stream() : discard;
  auto numbered = [](const std::string& dir, size_t k, const char* ext) {
    std::ostringstream name;
    name << dir << '/' << std::setw(4) << std::setfill('0') << k + 1 << ext;
    return name.str();
  };
  auto write_file = [](const std::string& path, const std::string& text) {
    OutputFile f(path, /*sweep_stale=*/false);  // the folder was swept once above
    f.stream() << text;
    f.commit();
  };
  std::vector<std::set<Link>> hard;
  for (size_t k = 0; k < src.size(); ++k) {
    if (ibm) {
      auto links = ibm_fwd->align(src[k], tgt[k]);
      if (ibm_rev) links = symmetrize(links, swap_links(ibm_rev->align(tgt[k], src[k])), opt.symmetrize);
      if (!gold.empty()) hard.push_back(links);
      out << to_pharaoh(links) << '\n';
      continue;
    }
    auto& tr = *forward;
    AttentionMatrix m = tgt.empty() ? free_attention(tr, src[k], opt.search) : forced_attention(tr, src[k], tgt[k]);
    if (opt.shift > 0) m = shift_rows(m, opt.shift);
    AttentionMatrix words = merge_to_words(m);
    std::set<Link> links;
    if (reverse) {
      // The reverse model reads the target as its source: its rows are our columns.
      const auto rev_words = merge_to_words(shift_rows(forced_attention(*reverse, tgt[k], src[k]), opt.shift));
      if (opt.symmetrize == Symmetrization::kAverage) {
        words = average_with_reverse(words, rev_words);
        m = words;  // the averaged matrix is what gets shown
        links = hard_alignment(words, opt.method, opt.threshold);
      } else {
        links = symmetrize(hard_alignment(words, opt.method, opt.threshold),
                           swap_links(hard_alignment(rev_words, opt.method, opt.threshold)), opt.symmetrize);
      }
    } else {
      links = hard_alignment(words, opt.method, opt.threshold);
    }
    const AttentionMatrix& shown = opt.level == "word" ? words : m;
    if (!gold.empty()) hard.push_back(links);
    if (!opt.heatmap_dir.empty()) {
      std::ostringstream svg;
      write_svg(svg, shown);
      write_file(numbered(opt.heatmap_dir, k, ".svg"), svg.str());
    }
    if (opt.format == "pharaoh") {
      out << to_pharaoh(links) << '\n';
    } else if (opt.format == "svg") {
      if (!opt.output_dir.empty()) {
        std::ostringstream svg;
        write_svg(svg, shown);
        write_file(numbered(opt.output_dir, k, ".svg"), svg.str());
      }
    } else if (!opt.output_dir.empty()) {
      std::ostringstream csv;
      write_csv(csv, shown);
      write_file(numbered(opt.output_dir, k, ".csv"), csv.str());
    } else {
      if (k > 0) out << '\n';  // blocks are separated by one empty line
      write_csv(out, shown);
    }
  }
  if (out_file) out_file->commit();
  AerScore score;
  if (!gold.empty()) {
    score = alignment_error_rate(hard, gold);
    spdlog::info("alignment vs {}: precision {:.4f} recall {:.4f} AER {:.4f} ({} links, {} sure gold links, {} pairs)",
                 opt.eval_gold, score.precision(), score.recall(), score.aer(), score.hyp, score.sure, hard.size());
  }
  return score;
}

}  // namespace nmt
