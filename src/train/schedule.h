// The validation-driven schedule of a training run: which validation is the
// best so far, when the learning rate decays (a plateau of --lr-patience
// validations, and every epoch end from --lr-decay-start on), and when early
// stopping ends the run. Pure bookkeeping: no
// tensors, no I/O, so it is unit-tested on its own (schedule_test.cc).
#pragma once
#include <cstdint>
#include <string>

#include "base/options.h"
#include "base/schedule_state.h"  // ScheduleState

namespace nmt {

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

// Why the epoch decay that `opt` asks for never lowers the rate of a step
// that trains, or "" when it does (or none is asked for): --lr-decay-start N
// decays at the end of epoch N, so with --max-epochs N or fewer the run ends
// first (a --lr-decay of 1, its largest value, decays nothing either). The
// trainer warns with it; the options stay valid (plateaus still decay when
// --lr-decay < 1). Never throws.
std::string epoch_decay_unused(const TrainOptions& opt);

}  // namespace nmt
