// The validation-driven schedule of a training run: which validation is the
// best so far, when the learning rate decays (a plateau of --lr-patience
// validations, and every epoch end from --lr-decay-start on), and when early
// stopping ends the run. Pure bookkeeping: no
// tensors, no I/O, so it is unit-tested on its own (schedule_test.cc).
#pragma once
#include <cstdint>

#include "base/options.h"

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

// What one validation meant.
struct ScheduleVerdict {
  bool improved = false;  // a new best: save best.ckpt
  bool decayed = false;   // the learning rate was multiplied by --lr-decay (never below --min-lr)
  bool stop = false;      // --early-stopping validations in a row without improvement
};

// Feeds one validation figure (`score`, higher is better) to the schedule in
// `state`, using opt.lr_decay, lr_patience, min_lr and early_stopping. The
// first validation always improves; a tie is no improvement. Never throws.
ScheduleVerdict update_schedule(const TrainOptions& opt, double score, ScheduleState* state);

// The epoch part of the schedule (Marian's --lr-decay-strategy epoch): when
// opt.lr_decay_start > 0 and `finished_epoch` >= it, multiplies the rate by
// opt.lr_decay (never below opt.min_lr) and returns true. Never throws.
bool decay_at_epoch_end(const TrainOptions& opt, int64_t finished_epoch, ScheduleState* state);

}  // namespace nmt
