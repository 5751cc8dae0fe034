// What the validation-driven schedule of a training run remembers between
// validations (train/schedule.h updates it). Plain data, like the options
// structs beside it, so that the checkpoint format (model/checkpoint.h,
// whose TrainState derives from it) stores it without depending on train/.
#pragma once
#include <cstdint>

namespace nmt {

// What the schedule remembers between validations; travels inside training
// checkpoints (TrainState derives from it) so that --resume continues it.
struct ScheduleState {
  double learning_rate = 0;      // current (possibly decayed) rate
  double best_metric = 0;        // best validation figure so far, in "higher is better" form
  bool has_best = false;         // false until the first validation
  int64_t bad_validations = 0;   // validations since the last improvement (early stopping)
  int64_t plateau = 0;           // validations since the last improvement or decay (learning rate)
};

}  // namespace nmt
