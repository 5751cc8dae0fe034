// nmt-align: attention matrices of a model as alignments, one per sentence
// pair (forced: the model reads the given target; free: it translates).
//   nmt-align -m model/best.ckpt --src a.en --tgt a.de > attention.csv
//   nmt-align -m model/best.ckpt --src a.en --tgt a.de --format pharaoh --eval-gold a.align
//   nmt-align -m model/best.ckpt --src a.en --tgt a.de --level word --heatmap maps/
//   nmt-align -m en-de.ckpt --reverse-model de-en.ckpt --symmetrize grow-diag-final-and
//             --src a.en --tgt a.de --format pharaoh
#include <CLI/CLI.hpp>

#include "align.h"
#include "app.h"

int main(int argc, char** argv) {
  nmt::AlignRunOptions opt;
  std::string method = "argmax";
  std::string symmetrize = "none";
  bool verbose = false;
  CLI::App app{"Attention of an nmt model as alignments: CSV matrices, Pharaoh links, SVG heatmaps, AER."};
  app.add_option("-m,--model", opt.model_path, "Checkpoint (.ckpt) written by nmt-train");
  app.add_option("--aligner", opt.aligner, "attention (the model's) or ibm2 (statistical, fast_align-style; needs no model)")
      ->check(CLI::IsMember({"attention", "ibm2"}))->capture_default_str();
  app.add_option("--ibm-train-src", opt.ibm_train_src, "ibm2: more source sentences to learn from (not aligned)");
  app.add_option("--ibm-train-tgt", opt.ibm_train_tgt, "ibm2: their target sentences");
  app.add_option("--ibm-iterations", opt.ibm.iterations, "ibm2: EM iterations")->capture_default_str();
  app.add_option("--ibm-tension", opt.ibm.diagonal_tension, "ibm2: preference for links near the diagonal")->capture_default_str();
  app.add_option("--src", opt.src, "Source sentences, one per line");
  app.add_option("--tgt", opt.tgt, "Target sentences (forced mode); without it the model translates (free mode)");
  app.add_option("--tsv", opt.tsv, "Pairs as source<TAB>target lines ('-': stdin)");
  app.add_option("-o,--output", opt.output, "Output file (default: stdout)");
  app.add_option("-f,--format", opt.format, "csv (matrices), pharaoh (word links i-j) or svg (heatmaps)")
      ->check(CLI::IsMember({"csv", "pharaoh", "svg"}))->capture_default_str();
  app.add_option("--level", opt.level, "Matrices over subword pieces or words (pieces merged: sum over source, mean over target)")
      ->check(CLI::IsMember({"subword", "word"}))->capture_default_str();
  app.add_option("--output-dir", opt.output_dir, "Write one NNNN.csv (or NNNN.svg) per pair into this folder");
  app.add_option("--heatmap", opt.heatmap_dir, "Also write an NNNN.svg heatmap per pair into this folder");
  app.add_option("--method", method, "Hard links: argmax (most attended source word per target word) or threshold")
      ->check(CLI::IsMember({"argmax", "threshold"}))->capture_default_str();
  app.add_option("--threshold", opt.threshold, "Weight at or above which a word pair links (--method threshold)")->capture_default_str();
  app.add_option("--shift", opt.shift, "Target token t takes the attention row of step t+N (the model reads y_t two steps later)")
      ->capture_default_str();
  app.add_option("--reverse-model", opt.reverse_model, "Target->source checkpoint whose links are combined with --symmetrize (forced mode)");
  app.add_option("--symmetrize", symmetrize,
                 "Combine with --reverse-model: intersection, union, grow-diag, grow-diag-final, grow-diag-final-and, or average (mean of both matrices)")
      ->check(CLI::IsMember({"none", "intersection", "union", "grow-diag", "grow-diag-final", "grow-diag-final-and", "average"}))
      ->capture_default_str();
  app.add_option("--eval-gold", opt.eval_gold, "Gold links (i-j sure, i?j possible): print precision, recall, AER");
  app.add_flag("--gold-one-based", opt.gold_one_based, "Gold indices start at 1 (NAACL 2003 .talp files)");
  app.add_option("-b,--beam-size", opt.search.beam_size, "Free mode: beam size (1: greedy)")->capture_default_str();
  app.add_option("-n,--max-pairs", opt.max_pairs, "Align at most N pairs (0: all)")->capture_default_str();
  app.add_option("--device", opt.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  app.add_option("--threads", opt.threads, "CPU threads (0: NMT_THREADS or all cores)")->capture_default_str();
  app.add_flag("-v,--verbose", verbose, "Debug logging");
  CLI11_PARSE(app, argc, argv);
  nmt::setup_logging(verbose);
  nmt::install_signal_handlers("nmt-align");
  return nmt::run_guarded([&] {
    opt.method = nmt::parse_hard_method(method);
    opt.symmetrize = nmt::parse_symmetrization(symmetrize);
    nmt::run_alignment(opt);
    return nmt::kExitOk;
  });
}
