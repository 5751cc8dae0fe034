// Adam over every parameter at once, steppable without reading the device.
// torch::optim::Adam runs about seven kernels per parameter and keeps its
// step count and learning rate on the host; a step of a small recurrent model
// on a GPU then waits on hundreds of launches, and cannot be captured into a
// CUDA graph (a replay would repeat the captured step count). FlatAdam keeps
// both moments as one flat buffer each and the step count and learning rate
// as device scalars: a step is about a dozen kernels whatever the number of
// parameters, issued without a read, and may be skipped on the device (a
// non-finite loss or gradient) without asking the host.
//
// It is a torch::optim::Adam to everything else: its state() holds an
// AdamParamState per parameter whose moments are views of the flat buffers,
// so checkpoints save and restore it as they do Adam's (sync_state() before
// saving; restored state is taken in by the next prepare()).
#pragma once
#include <torch/torch.h>

#include <vector>

namespace nmt {

class FlatAdam : public torch::optim::Adam {
 public:
  // One parameter group of `params` (float tensors on one device; a tensor
  // given twice, as tied weights appear in Module::parameters(), is one
  // parameter and is updated once a step). Throws nmt::Error when `params`
  // is empty, mixes devices, holds a tensor that is not float, or when
  // `options` asks for amsgrad. `tensor_ops`: step with the tensor
  // operations a GPU runs even on the CPU (where a fused pass is the
  // default), so that tests check that path without a GPU.
  FlatAdam(const std::vector<torch::Tensor>& params, const torch::optim::AdamOptions& options,
           bool tensor_ops = false);

  // torch::optim::Optimizer's step: prepare(), then step(gradients(), true).
  // Returns an undefined tensor. Throws c10::Error when given a closure.
  torch::Tensor step(LossClosure closure = nullptr) override;

  // Takes in, on the host, what may have changed since the last step: the
  // group's learning rate, and state restored into state() (a resumed
  // checkpoint), copied into the flat moments and step count. Call it before
  // each step(grads, ok), outside any CUDA graph capture. Throws nmt::Error
  // when restored state does not fit: a moment of another shape, amsgrad's
  // maximum, or steps that differ between parameters.
  void prepare();

  // Every parameter's gradient, flattened and joined in parameter order:
  // [N], N the parameters' total size, float, on their device; a parameter
  // without a gradient contributes zeros. Allocates [N]; reads nothing.
  torch::Tensor gradients() const;

  // One Adam step (torch::optim::Adam's arithmetic) with the gradients
  // `grads` ([N] as gradients() gives; overwritten: weight decay is added,
  // and zeros replace them where the step is skipped), taken only where
  // `ok` ([] bool, on the parameters' device) is true: otherwise parameters,
  // moments and step count stay exactly as they were, even when `grads`
  // holds NaN or Inf. Off the CPU it issues device work only (no read, no
  // decision on a value), so that it can be captured into a CUDA graph once
  // prepare() ran; on the CPU it reads `ok` and runs one fused pass.
  void step(const torch::Tensor& grads, const torch::Tensor& ok);

  // Writes the step count (read from the device: a wait) into every
  // parameter's AdamParamState, as checkpoints store it. Call before saving.
  void sync_state();

  // The parameters as the flat buffers order them, each once.
  const std::vector<torch::Tensor>& flat_parameters() const { return params_; }

 private:
  void step_cpu(const torch::Tensor& grads, bool ok);  // step() on the CPU: one fused pass

  std::vector<torch::Tensor> params_;  // distinct, in first-seen order
  std::vector<int64_t> numel_;         // each parameter's size
  torch::Tensor exp_avg_, exp_avg_sq_; // [N] float: the moments, flat
  torch::Tensor steps_;                // [] double: steps taken
  torch::Tensor lr_;                   // [] double: the group's learning rate, as of prepare()
  double lr_host_ = -1;                // the value lr_ holds
  bool fused_cpu_ = true;              // on the CPU: step_cpu()
};

}  // namespace nmt
