// nmt-train: trains an attention model on a parallel corpus, or (--release)
// writes a trained model without its training state, or (--convert) writes
// a checkpoint of an older format in the current one.
//   nmt-train --train-src train.en --train-tgt train.de --valid-src ... -o model/
//   nmt-train --config configs/demo.toml
//   nmt-train --release model/best.ckpt model.ckpt
//   nmt-train --convert old.ckpt new.ckpt
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "base/error.h"
#include "cli.h"
#include "entry_points.h"
#include "model/checkpoint.h"
#include "tools/app.h"
#include "train/distributed.h"
#include "train/trainer.h"

namespace {
std::atomic<bool> g_stop{false};  // set by the first SIGINT/SIGTERM: save and stop
}  // namespace

int nmt::apps::train_main(int argc, char** argv) {
  nmt::TrainOptions opt;
  nmt::TokenizerOptions tok;
  nmt::ModelOptions model;
  nmt::ReleaseOptions release;  // a command-line action: not in config files or --dump-config
  try {  // torchrun's environment variables give the distributed defaults
    opt.dist = nmt::distributed_from_env(opt.dist);
  } catch (const nmt::Error& e) {
    std::fprintf(stderr, "nmt-train: %s\n", e.what());
    return nmt::kExitError;
  }
  CLI::App app{"Train an RNN attention translation model (Bahdanau et al. 2015)."};
  app.get_formatter()->column_width(34);
  nmt::cli::Tool tool(app, "nmt-train");
  tool.binder().add(opt).add(tok).add(model).add(release);
  app.get_option("--release")->expected(2)->type_name("IN OUT");
  app.get_option("--convert")->expected(2)->type_name("IN OUT");
  app.footer(
      "Examples:\n"
      "  nmt-train --train-src train.en --train-tgt train.de --valid-src val.en --valid-tgt val.de -o run\n"
      "  nmt-train -c configs/demo.toml -o run --max-epochs 3\n"
      "  nmt-train -c run/config.toml --resume\n"
      "  nmt-train --release run/best.ckpt model.ckpt\n"
      "  nmt-train --convert old-format.ckpt new.ckpt");
  if (const int code = tool.parse(argc, argv, opt, tok, model); code >= 0) return code;
  opt.command_line = nmt::command_line(argc, argv);
  if (!release.convert.empty()) {
    nmt::setup_logging(tool.verbose);
    return nmt::run_guarded([&] {
      release.validate();
      const auto r = nmt::convert_checkpoint(release.convert[0], release.convert[1]);
      spdlog::info("wrote {}: {} in checkpoint format {} (was {}), {}, {:.1f} MB (was {:.1f} MB)", release.convert[1],
                   release.convert[0], nmt::kCheckpointVersion, r.from_version,
                   r.resumable ? "resumable from step " + std::to_string(r.step) : "weights only",
                   r.out_bytes / 1e6, r.in_bytes / 1e6);
      return nmt::kExitOk;
    });
  }
  if (!release.paths.empty()) {
    nmt::setup_logging(tool.verbose);
    return nmt::run_guarded([&] {
      release.validate();
      const auto r = nmt::release_checkpoint(release.paths[0], release.paths[1]);
      spdlog::info("wrote {}: the model of {} ({}) without optimizer and training state, {:.1f} MB (was {:.1f} MB)",
                   release.paths[1], release.paths[0], r.step >= 0 ? "step " + std::to_string(r.step) : "step unknown",
                   r.out_bytes / 1e6, r.in_bytes / 1e6);
      return nmt::kExitOk;
    });
  }
  opt.given = tool.given();
  // Before the first log line: a closed log pipe must not end the run (SIGPIPE ignored).
  nmt::install_signal_handlers("nmt-train", &g_stop);  // a second signal leaves at once
  nmt::setup_logging(tool.verbose, /*warnings_only=*/opt.dist.world_size > 1 && opt.dist.rank > 0);
  return nmt::run_guarded([&] {
    nmt::train(opt, tok, model, &g_stop);  // an interrupted run has saved last.ckpt: still a success
    return nmt::kExitOk;
  });
}
