// The validation-driven learning-rate and early-stopping schedule.
#include "train/schedule.h"

#include <algorithm>

namespace nmt {

ScheduleVerdict update_schedule(const TrainOptions& opt, double score, ScheduleState* s) {
  ScheduleVerdict v;
  v.improved = !s->has_best || score > s->best_metric;
  if (v.improved) {
    s->best_metric = score;
    s->has_best = true;
    s->bad_validations = 0;
    s->plateau = 0;
  } else {
    ++s->bad_validations;
    if (++s->plateau >= opt.lr_patience && s->learning_rate > opt.min_lr) {
      s->learning_rate = std::max(opt.min_lr, s->learning_rate * opt.lr_decay);
      s->plateau = 0;
      v.decayed = true;
    }
  }
  v.stop = opt.early_stopping > 0 && s->bad_validations >= opt.early_stopping;
  return v;
}

bool decay_at_epoch_end(const TrainOptions& opt, int64_t finished_epoch, ScheduleState* s) {
  if (opt.lr_decay_start <= 0 || finished_epoch < opt.lr_decay_start || s->learning_rate <= opt.min_lr) return false;
  s->learning_rate = std::max(opt.min_lr, s->learning_rate * opt.lr_decay);
  return true;
}

}  // namespace nmt
