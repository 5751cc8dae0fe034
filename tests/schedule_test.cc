// The validation schedule on its own: best model, learning-rate decay on
// plateaus and at epoch ends, its floor, early stopping, and the warning for
// an epoch decay that no step trains at.
#include "train/schedule.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

nmt::TrainOptions options(int64_t patience, int64_t early_stopping) {
  nmt::TrainOptions o;
  o.lr_decay = 0.5;
  o.lr_patience = patience;
  o.min_lr = 0.1;
  o.early_stopping = early_stopping;
  return o;
}

TEST(ScheduleTest, TheFirstValidationIsTheBestAndATieIsNoImprovement) {
  const auto opt = options(10, 0);
  nmt::ScheduleState s;
  s.learning_rate = 1;
  EXPECT_TRUE(nmt::update_schedule(opt, -1e9, &s).improved);
  EXPECT_TRUE(s.has_best);
  EXPECT_FALSE(nmt::update_schedule(opt, -1e9, &s).improved);
  EXPECT_EQ(s.bad_validations, 1);
  EXPECT_TRUE(nmt::update_schedule(opt, 5, &s).improved);
  EXPECT_EQ(s.best_metric, 5);
  EXPECT_EQ(s.bad_validations, 0);
  EXPECT_EQ(s.plateau, 0);
}

TEST(ScheduleTest, PlateausDecayTheRateDownToItsFloor) {
  const auto opt = options(2, 0);
  nmt::ScheduleState s;
  s.learning_rate = 1;
  nmt::update_schedule(opt, 10, &s);
  // Scores that never improve: a decay every second validation, 1 -> 0.5 ->
  // 0.25 -> 0.125 -> 0.1 (the floor), then none.
  std::vector<double> rates;
  std::vector<bool> decays;
  for (int i = 0; i < 12; ++i) {
    const auto v = nmt::update_schedule(opt, 9, &s);
    EXPECT_FALSE(v.improved);
    EXPECT_FALSE(v.stop);  // early stopping is off
    rates.push_back(s.learning_rate);
    decays.push_back(v.decayed);
  }
  EXPECT_EQ(rates, (std::vector<double>{1, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125, 0.1, 0.1, 0.1, 0.1, 0.1}));
  EXPECT_EQ(decays, (std::vector<bool>{false, true, false, true, false, true, false, true, false, false, false, false}));
  EXPECT_EQ(s.bad_validations, 12);
}

TEST(ScheduleTest, AnImprovementRestartsThePlateau) {
  const auto opt = options(2, 0);
  nmt::ScheduleState s;
  s.learning_rate = 1;
  nmt::update_schedule(opt, 1, &s);
  nmt::update_schedule(opt, 0, &s);  // plateau 1
  nmt::update_schedule(opt, 2, &s);  // better: plateau 0 again
  EXPECT_FALSE(nmt::update_schedule(opt, 0, &s).decayed);
  EXPECT_TRUE(nmt::update_schedule(opt, 0, &s).decayed);
  EXPECT_EQ(s.learning_rate, 0.5);
}

TEST(ScheduleTest, EarlyStoppingAfterSoManyValidationsWithoutImprovement) {
  const auto opt = options(100, 3);
  nmt::ScheduleState s;
  s.learning_rate = 1;
  EXPECT_FALSE(nmt::update_schedule(opt, 1, &s).stop);
  EXPECT_FALSE(nmt::update_schedule(opt, 1, &s).stop);
  EXPECT_FALSE(nmt::update_schedule(opt, 0.5, &s).stop);
  EXPECT_TRUE(nmt::update_schedule(opt, 1, &s).stop);  // the third without improvement
  // A decay does not reset the count.
  const auto decaying = options(1, 2);
  nmt::ScheduleState d;
  d.learning_rate = 1;
  nmt::update_schedule(decaying, 1, &d);
  const auto first = nmt::update_schedule(decaying, 0, &d);
  EXPECT_TRUE(first.decayed);
  EXPECT_FALSE(first.stop);
  EXPECT_TRUE(nmt::update_schedule(decaying, 0, &d).stop);
}

}  // namespace

TEST(ScheduleTest, EpochDecayStartsAtItsEpochAndStopsAtTheFloor) {
  auto opt = options(10, 0);  // min_lr 0.1, lr_decay 0.5
  nmt::ScheduleState s;
  s.learning_rate = 1;
  for (int64_t e = 1; e <= 3; ++e) EXPECT_FALSE(nmt::decay_at_epoch_end(opt, e, &s)) << "off by default";
  EXPECT_EQ(s.learning_rate, 1);
  opt.lr_decay_start = 3;
  std::vector<double> rates;
  std::vector<bool> decays;
  for (int64_t e = 1; e <= 7; ++e) {
    decays.push_back(nmt::decay_at_epoch_end(opt, e, &s));
    rates.push_back(s.learning_rate);
  }
  EXPECT_EQ(decays, (std::vector<bool>{false, false, true, true, true, true, false}));
  EXPECT_EQ(rates, (std::vector<double>{1, 1, 0.5, 0.25, 0.125, 0.1, 0.1}));
}

TEST(ScheduleTest, EpochDecayThatNoStepTrainsAtIsNamed) {
  auto opt = options(10, 0);  // lr_decay 0.5
  opt.max_epochs = 3;
  EXPECT_EQ(nmt::epoch_decay_unused(opt), "") << "no epoch decay asked for";
  opt.lr_decay_start = 2;  // epoch 3 trains at half the rate
  EXPECT_EQ(nmt::epoch_decay_unused(opt), "");
  // The decay at the end of epoch 3 would come after the run: what happened to
  // a two-epoch student run with --lr-decay-start 2.
  for (int64_t start : {3, 4}) {
    opt.lr_decay_start = start;
    const auto why = nmt::epoch_decay_unused(opt);
    EXPECT_NE(why.find("--lr-decay-start " + std::to_string(start) + " with --max-epochs 3"), std::string::npos) << why;
    EXPECT_NE(why.find("--lr-decay-start 2)"), std::string::npos) << why;
  }
  opt.max_epochs = 1;
  opt.lr_decay_start = 1;
  const auto one = nmt::epoch_decay_unused(opt);
  EXPECT_NE(one.find("so it lowers no step's rate"), std::string::npos) << one;
  EXPECT_EQ(one.find("(the last epoch"), std::string::npos) << "no epoch to suggest: " << one;
  opt.max_epochs = 3;
  opt.lr_decay = 1.0;
  EXPECT_NE(nmt::epoch_decay_unused(opt).find("--lr-decay 1: nothing decays"), std::string::npos);
}
