// Exponential smoothing of the weights (Marian's --exponential-smoothing):
// beside the weights the optimizer steps, a moving average of them, updated
// after every step, which validation, checkpoints and so translation use.
// The average of step t is  a_t = (1 - d_t) a_{t-1} + d_t w_t  with
// d_t = max(factor, 9 / (t + 9)): early on the average follows the weights
// closely (d_1 = 0.9), later it spans about 1 / factor steps.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace nmt {

class WeightSmoothing {
 public:
  // Averages of `params` (the model's distinct parameters, tensors that the
  // optimizer updates in place), starting from their current values.
  // Throws nmt::UsageError unless 0 < factor < 1.
  WeightSmoothing(std::vector<torch::Tensor> params, double factor);

  // Takes in the weights after optimizer step `step` (1 for the first);
  // issues device work only, reads nothing.
  void update(int64_t step);

  // While an Applied is alive the parameters hold the averages (and the
  // averages' slots the stepped weights, which weights_in_use() gives);
  // its end puts both back, bit for bit. Nests: only the outermost swaps.
  class Applied {
   public:
    explicit Applied(WeightSmoothing* s);  // null: nothing to apply
    ~Applied();
    Applied(const Applied&) = delete;
    Applied& operator=(const Applied&) = delete;

   private:
    WeightSmoothing* s_;
  };

  // The parameters, as given.
  const std::vector<torch::Tensor>& parameters() const { return params_; }
  // The weights the optimizer steps, in parameter order: the parameters
  // themselves, or while an Applied is alive the slots that hold them.
  const std::vector<torch::Tensor>& stepped_weights() const { return applied_ > 0 ? averages_ : params_; }

  // Sets the averages to the parameters' values now, then the parameters to
  // `stepped` (a resumed run: the checkpoint's model weights are the
  // averages, its training state the stepped weights). Throws nmt::Error
  // when `stepped` does not match the parameters in number and shapes.
  void restart_from(const std::vector<torch::Tensor>& stepped);

 private:
  void swap();

  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> averages_;
  double factor_;
  int applied_ = 0;  // Applied objects alive
};

}  // namespace nmt
