// Exponential smoothing of the weights (Marian's --exponential-smoothing):
// beside the weights the optimizer steps, a moving average of them, updated
// after every step, which validation, checkpoints and so translation use.
// The average of step t is  a_t = (1 - d_t) a_{t-1} + d_t w_t  with
// d_t = max(factor, 9 / (t + 9)): early on the average follows the weights
// closely (d_1 = 0.9); later it spans about min(1 / factor, t / 9) steps.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace nmt {

class WeightSmoothing {
 public:
  // Averages of `params` (the model's distinct parameters, float tensors on
  // one device that the optimizer updates in place), starting from their
  // current values. Allocates the averages and one scratch buffer the size
  // of the largest parameter. Throws nmt::UsageError unless 0 < factor < 1.
  WeightSmoothing(std::vector<torch::Tensor> params, double factor);

  // Takes in the weights after optimizer step `step` (1 for the first):
  // device work only, nothing read or allocated. Throws nmt::Error when a
  // swap failed earlier (the averages are lost), c10::Error from the device.
  void update(int64_t step);

  // While an Applied is alive the parameters hold the averages (and the
  // averages' slots the stepped weights, which stepped_weights() gives);
  // its end puts both back, bit for bit. Nests: only the outermost swaps.
  // Swaps copy through the scratch buffer and allocate nothing. The
  // constructor throws (nmt::Error after a failed swap, c10::Error from the
  // device) with everything as it was; the destructor never throws: a copy
  // that fails there is logged, and update() refuses to go on.
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
  // averages, its training state the stepped weights). Checks everything
  // before it copies: throws nmt::Error, changing nothing, when `stepped`
  // does not match the parameters in number and shapes or an Applied is alive.
  void restart_from(const std::vector<torch::Tensor>& stepped);

 private:
  // Exchanges the values of params_ and averages_ through scratch_. Throws
  // nmt::Error when a swap failed before, c10::Error from the device (then
  // marking the averages lost).
  void swap();

  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> averages_;
  torch::Tensor scratch_;  // [largest parameter's size], for swap()
  double factor_;
  int applied_ = 0;     // Applied objects alive
  bool lost_ = false;   // a swap failed part-way: params_ and averages_ are mixed
};

}  // namespace nmt
