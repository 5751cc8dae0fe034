// nmt-align: attention matrices of a model as alignments, one per sentence
// pair (forced: the model reads the given target; free: it translates).
//   nmt-align -m model/best.ckpt --src a.en --tgt a.de > attention.csv
//   nmt-align -m model/best.ckpt --src a.en --tgt a.de --format pharaoh --eval-gold a.align
//   nmt-align -m model/best.ckpt --src a.en --tgt a.de --level word --heatmap maps/
//   nmt-align -m en-de.ckpt --reverse-model de-en.ckpt --symmetrize grow-diag-final-and
//             --src a.en --tgt a.de --format pharaoh
#include "cli.h"
#include "entry_points.h"
#include "tools/align.h"
#include "tools/app.h"

int nmt::apps::align_main(int argc, char** argv) {
  nmt::AlignRunOptions opt;
  CLI::App app{"Attention of an nmt model as alignments: CSV matrices, Pharaoh links, SVG heatmaps, AER."};
  nmt::cli::Tool tool(app, "nmt-align");
  tool.binder().add(opt);
  app.footer(
      "Examples:\n"
      "  nmt-align -m run/best.ckpt --src a.en --tgt a.de > attention.csv\n"
      "  nmt-align -m run/best.ckpt --src a.en --tgt a.de -f pharaoh --eval-gold a.align\n"
      "  nmt-align --aligner ibm2 --src a.en --tgt a.de --symmetrize grow-diag-final-and > links.txt");
  if (const int code = tool.parse(argc, argv, opt); code >= 0) return code;
  opt.given = tool.given();
  nmt::setup_logging(tool.verbose);
  nmt::install_signal_handlers("nmt-align");
  return nmt::run_guarded([&] {
    nmt::run_alignment(opt);
    return nmt::kExitOk;
  });
}
