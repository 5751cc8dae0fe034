// nmt-train: trains an attention model on a parallel corpus.
//   nmt-train --train-src train.en --train-tgt train.de --valid-src ... -o model/
//   nmt-train --config configs/demo.toml
#include <atomic>
#include <cstdio>

#include "base/error.h"
#include "cli.h"
#include "tools/app.h"
#include "train/distributed.h"
#include "train/trainer.h"

namespace {
std::atomic<bool> g_stop{false};  // set by the first SIGINT/SIGTERM: save and stop
}  // namespace

int main(int argc, char** argv) {
  nmt::TrainOptions opt;
  nmt::TokenizerOptions tok;
  nmt::ModelOptions model;
  try {  // torchrun's environment variables give the distributed defaults
    opt.dist = nmt::distributed_from_env(opt.dist);
  } catch (const nmt::Error& e) {
    std::fprintf(stderr, "nmt-train: %s\n", e.what());
    return nmt::kExitError;
  }
  CLI::App app{"Train an RNN attention translation model (Bahdanau et al. 2015)."};
  app.get_formatter()->column_width(34);
  nmt::cli::Tool tool(app, "nmt-train");
  tool.binder().add(opt).add(tok).add(model);
  app.footer(
      "Examples:\n"
      "  nmt-train --train-src train.en --train-tgt train.de --valid-src val.en --valid-tgt val.de -o run\n"
      "  nmt-train -c configs/demo.toml -o run --max-epochs 3\n"
      "  nmt-train -c run/config.toml --resume");
  if (const int code = tool.parse(argc, argv, opt, tok, model); code >= 0) return code;
  opt.command_line = nmt::command_line(argc, argv);
  nmt::setup_logging(tool.verbose, /*warnings_only=*/opt.dist.world_size > 1 && opt.dist.rank > 0);
  return nmt::run_guarded([&] {
    // Model options given on the command line or in the config must agree with a resumed checkpoint.
    nmt::ModelOptions::fields(model, [&](const nmt::Field& f, const auto&) {
      if (tool.given(f.name)) opt.explicit_model_fields.push_back(nmt::underscored(f.name));
    });
    nmt::install_signal_handlers("nmt-train", &g_stop);  // a second signal leaves at once
    nmt::train(opt, tok, model, &g_stop);  // an interrupted run has saved last.ckpt: still a success
    return nmt::kExitOk;
  });
}
