// Training curves as a picture: an SVG of what metrics.jsonl holds, viewable
// in any browser. Torch-free.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace nmt {

// One line of metrics.jsonl, reduced to what the curves show. Fields a line
// lacks are NaN.
struct MetricsPoint {
  std::string type;  // "train", "valid" or "average"
  double step = 0;
  double train_loss, lr, tokens_per_s;  // train lines (lr: valid lines too)
  double valid_nll, bleu, chrf;         // valid and average lines
};

// Reads the lines of a metrics.jsonl stream. Lines that are not flat JSON
// objects with a "type" and a "step" are skipped. Never throws (beyond
// std::bad_alloc).
std::vector<MetricsPoint> read_metrics(std::istream& in);

// A standalone SVG with four panels against steps: training loss (label-
// smoothed) and validation loss (plain cross-entropy), validation BLEU and
// chrF (average.ckpt's figures as hollow marks), learning rate, and training
// speed in target tokens/s. An empty input gives panels that say so.
std::string training_curves_svg(const std::vector<MetricsPoint>& points, const std::string& title);

// Renders `metrics_path` into `svg_path` (written whole or not at all).
// Never throws: a failure is logged as a warning, since the picture must not
// stop a training run.
void write_training_curves(const std::string& metrics_path, const std::string& svg_path, const std::string& title);

}  // namespace nmt
