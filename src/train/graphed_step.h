// The training step on fixed shapes, replayed from CUDA graphs. A step of a
// small recurrent model on a GPU waits on hundreds of kernel launches and on
// the host's dispatch of each; captured once per batch shape into a CUDA
// graph, it is one launch. Each batch is padded (pad_batch()) to the next
// shape edge: every batch to the same rows, source and target positions up
// to a multiple of kPositionStep; the encoder runs over the padded batch
// (no read of the lengths), the loss scale is a device scalar, and
// clipping, the finiteness test and FlatAdam's step stay on the device. A
// shape's first step runs eagerly, its second is captured, later ones are
// replayed (search/step_graph.h). Without CUDA graphs (off CUDA, or a build
// without them) the same padded step runs eagerly: tests check it on the CPU.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "model/batch.h"
#include "model/model.h"
#include "train/flat_adam.h"

namespace nmt {

// Source and target positions are padded up to a multiple of this: fewer
// shapes (captures) against more padding, which a launch-bound GPU runs
// almost for free.
constexpr int64_t kPositionStep = 8;

struct GraphedStepOptions {
  int64_t rows = 64;              // rows of every padded batch: at least the largest batch's
  double label_smoothing = 0.0;   // as TrainOptions::label_smoothing
  double r_drop = 0.0;            // as TrainOptions::r_drop: each padded batch runs as 2 x rows rows
  double clip_norm = 0.0;         // as TrainOptions::clip_norm (<= 0: no clipping)
  bool capture = true;            // capture CUDA graphs where the build and device allow (else eager)
};

// What one step did.
struct GraphedStepResult {
  double loss_sum = 0;  // summed label-smoothed loss over the batch's target tokens (with r_drop: the two runs' mean)
  bool finite = true;   // loss and gradient norm were finite: the step was taken (else skipped, nothing changed)
};

class GraphedTrainStep {
 public:
  // Steps `model` (in training mode) with `optimizer`, which must optimize
  // exactly the model's parameters, on `device`.
  GraphedTrainStep(Seq2Seq model, FlatAdam& optimizer, const GraphedStepOptions& options, const torch::Device& device);
  ~GraphedTrainStep();
  GraphedTrainStep(const GraphedTrainStep&) = delete;
  GraphedTrainStep& operator=(const GraphedTrainStep&) = delete;

  // One step on `batch` (on the CPU): forward, backward, clipping and Adam,
  // reading the device once at its end. Throws nmt::Error when the batch has
  // more rows than options.rows or guided alignment rows; what LibTorch or
  // CUDA throws otherwise.
  GraphedStepResult run(const Batch& batch);

  // How many shapes have been seen (each one graph where graphs are captured).
  size_t shapes() const { return shapes_.size(); }
  // How many of them replay a captured CUDA graph.
  size_t captured() const;

  // For the log: "batches padded to 64 rows and positions in steps of 8,
  // each shape's steps replayed from a CUDA graph" (or "run eagerly: ...").
  std::string describe() const;

 private:
  struct Shape;
  Shape& shape_for(int64_t src_positions, int64_t tgt_positions);
  void step(Shape& s);  // what a graph holds: reads and writes only s's buffers, the model and the optimizer

  Seq2Seq model_;
  FlatAdam& optimizer_;
  GraphedStepOptions options_;
  torch::Device device_;
  std::vector<torch::Tensor> params_;
  std::map<std::tuple<int64_t, int64_t>, std::unique_ptr<Shape>> shapes_;  // by (source, target) positions
};

}  // namespace nmt
