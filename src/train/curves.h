// Training curves as a picture: an SVG of what metrics.jsonl holds, viewable
// in any browser. Torch-free.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace nmt {

// One line of metrics.jsonl, reduced to what the curves show. Numbers a line
// lacks (or holds as null) are NaN.
struct MetricsPoint {
  std::string type;  // "train", "valid" or "average"
  double step = 0;
  double epoch;                         // train and valid lines: the epoch of the step
  double train_loss, lr, tokens_per_s;  // train lines (lr: valid lines too)
  double valid_nll, bleu, chrf;         // valid and average lines
  bool new_best = false;                // valid lines: best.ckpt was written at this validation
};

// Reads the lines of a metrics.jsonl stream with a JSON parser. Lines that
// are not JSON objects with a string "type" and a numeric "step" are
// skipped. Never throws (beyond std::bad_alloc).
std::vector<MetricsPoint> read_metrics(std::istream& in);

// A standalone SVG with four panels against steps: training loss (label-
// smoothed) and validation loss (plain cross-entropy), validation BLEU and
// chrF (average.ckpt's figures as hollow marks), learning rate, and training
// speed in target tokens/s. Points are taken in the order of the lines; a
// line whose step is below an earlier line's, or equal to that of an earlier
// line of its type (a run resumed from an older last.ckpt logs those steps
// again), supersedes the earlier lines from there on. The learning rate is drawn
// as steps: each rate holds until the next line. Every panel marks the ends
// of epochs (dashed vertical lines at the last line of each epoch, from the
// lines' "epoch"), and the scores panel the step of best.ckpt (the last
// validation with "new_best"). An empty input gives panels that say so.
std::string training_curves_svg(const std::vector<MetricsPoint>& points, const std::string& title);

// Renders `metrics_path` into `svg_path` (written whole or not at all).
// Never throws: a failure is logged as a warning, since the picture must not
// stop a training run.
void write_training_curves(const std::string& metrics_path, const std::string& svg_path, const std::string& title);

}  // namespace nmt
