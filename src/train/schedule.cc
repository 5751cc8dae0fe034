// The validation-driven learning-rate and early-stopping schedule.
#include "train/schedule.h"

#include <algorithm>

#include "base/format.h"

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

std::string epoch_decay_unused(const TrainOptions& opt) {
  if (opt.lr_decay_start <= 0) return "";
  const std::string asked = "--lr-decay-start " + std::to_string(opt.lr_decay_start);
  if (opt.lr_decay >= 1) return asked + " with --lr-decay " + shortest_decimal(opt.lr_decay) + ": nothing decays";
  if (opt.lr_decay_start < opt.max_epochs) return "";
  std::string why = asked + " with --max-epochs " + std::to_string(opt.max_epochs) +
                    ": the first epoch-end decay comes at the end of the last epoch or later, so it lowers no step's rate";
  if (opt.max_epochs > 1) why += " (the last epoch at a lower rate: --lr-decay-start " + std::to_string(opt.max_epochs - 1) + ")";
  return why;
}

}  // namespace nmt
