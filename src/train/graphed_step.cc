// GraphedTrainStep: see graphed_step.h. Shapes: R rows, S source and T
// target positions (padded), V target vocabulary, N parameters' total size.
#include "train/graphed_step.h"

#include <cmath>
#include <string>

#include "base/error.h"
#include "search/step_graph.h"
#include "train/gradients.h"
#include "train/losses.h"

namespace nmt {

// One shape's buffers (allocated before any capture, so that replays find
// them where the graph left them) and its graph.
struct GraphedTrainStep::Shape {
  torch::Tensor src;      // [R, S] int64
  torch::Tensor tgt_in;   // [R, T] int64
  torch::Tensor tgt_out;  // [R, T] int64
  torch::Tensor scale;    // [] float: 1 / the batch's target tokens
  torch::Tensor loss;     // [] double: the summed loss, out
  torch::Tensor norm;     // [] double: the gradient norm before clipping, out
  std::unique_ptr<StepGraph> graph;
};

GraphedTrainStep::GraphedTrainStep(Seq2Seq model, FlatAdam& optimizer, const GraphedStepOptions& options,
                                   const torch::Device& device)
    : model_(std::move(model)), optimizer_(optimizer), options_(options), device_(device),
      params_(optimizer.flat_parameters()) {
  if (options_.rows < 1) throw Error("graphed training step: rows must be at least 1");
}

GraphedTrainStep::~GraphedTrainStep() = default;

size_t GraphedTrainStep::captured() const {
  size_t n = 0;
  for (const auto& [key, s] : shapes_) n += s->graph->captured() ? 1 : 0;
  return n;
}

std::string GraphedTrainStep::describe() const {
  const bool graphs = options_.capture && device_.is_cuda() && cuda_graphs_built();
  return "batches padded to " + std::to_string(options_.rows) + " rows and positions in steps of " +
         std::to_string(kPositionStep) + ", " +
         (graphs ? std::string("each shape's steps replayed from a CUDA graph")
                 : "run eagerly (" + std::string(device_.is_cuda() ? "this build has no CUDA graphs" : "CUDA graphs are for CUDA") + ")");
}

GraphedTrainStep::Shape& GraphedTrainStep::shape_for(int64_t src_positions, int64_t tgt_positions) {
  auto& s = shapes_[{src_positions, tgt_positions}];
  if (s) return *s;
  s = std::make_unique<Shape>();
  const auto ids = torch::TensorOptions().dtype(torch::kInt64).device(device_);
  s->src = torch::zeros({options_.rows, src_positions}, ids);
  s->tgt_in = torch::zeros({options_.rows, tgt_positions}, ids);
  s->tgt_out = torch::zeros({options_.rows, tgt_positions}, ids);
  s->scale = torch::zeros({}, torch::TensorOptions().device(device_));
  s->loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device_));
  s->norm = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device_));
  Shape* shape = s.get();
  s->graph = std::make_unique<StepGraph>([this, shape] { step(*shape); }, device_, options_.capture);
  return *s;
}

void GraphedTrainStep::step(Shape& s) {
  for (auto p : params_) p.mutable_grad().reset();  // the backward writes them anew (in a graph: its own memory)
  const bool r_drop = options_.r_drop > 0;  // the rows twice over in one pass: two dropout masks
  const auto src = r_drop ? torch::cat({s.src, s.src}) : s.src;               // [R or 2R, S]
  const auto tgt_in = r_drop ? torch::cat({s.tgt_in, s.tgt_in}) : s.tgt_in;  // [R or 2R, T]
  const auto logits = model_->forward(src, torch::Tensor(), tgt_in);  // [R or 2R, T, V]
  // [] summed over target tokens; detached, what the step reports
  const auto [loss, value] = training_loss(logits, s.tgt_out, options_.label_smoothing, options_.r_drop);
  (loss * s.scale).backward();
  auto grads = optimizer_.gradients();  // [N]
  const double max_norm = options_.clip_norm > 0 ? options_.clip_norm : std::numeric_limits<double>::infinity();
  const auto norm = clip_gradient(grads, max_norm, ClipRead::kDeferred);  // [], before clipping
  optimizer_.step(grads, torch::isfinite(value) & torch::isfinite(norm));
  s.loss.copy_(value);
  s.norm.copy_(norm);
}

GraphedStepResult GraphedTrainStep::run(const Batch& batch) {
  if (batch.guide.defined()) throw Error("graphed training step: guided alignment is not supported");
  if (batch.size() > options_.rows)
    throw Error("graphed training step: a batch of " + std::to_string(batch.size()) + " rows, over the " +
                std::to_string(options_.rows) + " of every graph");
  const auto up = [](int64_t n) { return (n + kPositionStep - 1) / kPositionStep * kPositionStep; };
  const int64_t S = up(batch.src.size(1)), T = up(batch.tgt_in.size(1));
  auto& s = shape_for(S, T);
  const auto padded = pad_batch(batch, options_.rows, S, T);
  s.src.copy_(padded.src);
  s.tgt_in.copy_(padded.tgt_in);
  s.tgt_out.copy_(padded.tgt_out);
  s.scale.fill_(1.0 / static_cast<double>(batch.tgt_tokens));
  optimizer_.prepare();
  s.graph->run();
  const auto both = torch::stack({s.loss, s.norm}).cpu();  // the one read
  GraphedStepResult r;
  r.loss_sum = both[0].item<double>();
  r.finite = std::isfinite(r.loss_sum) && std::isfinite(both[1].item<double>());
  return r;
}

}  // namespace nmt
