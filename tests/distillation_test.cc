// Word-level distillation (--kd-teachers, train/teachers.h): a student
// trained towards its teacher's distribution ends nearer it than one trained
// on the references alone; teachers of other vocabularies and conflicting
// options are refused. The loss itself: losses_test.cc.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "model/batch.h"
#include "model/checkpoint.h"
#include "model/device.h"
#include "test_util.h"
#include "train/teachers.h"
#include "train/trainer.h"
#include "trainer_util.h"

namespace {

using nmt::test::base_options;
using nmt::test::Quiet;
using nmt::test::train_tiny;
using nmt::test::valid_batch;
using nmt::test::tiny_arch;
using nmt::test::toy_tok;

// KL(teacher || student) summed over the target positions of `b` that are
// not padding, both models in eval mode.
double divergence(const nmt::Teachers& teacher, nmt::LoadedModel& student, const nmt::Batch& b) {
  student.model->eval();
  torch::NoGradGuard no_grad;
  const auto t = teacher.log_probs(b);                                                           // [B, T, V]
  const auto s = torch::log_softmax(student.model->forward(b.src, b.src_len, b.tgt_in), 2);     // [B, T, V]
  const auto per_position = (t.exp() * (t - s)).sum(2);                                          // [B, T]
  return per_position.masked_fill(b.tgt_out.eq(nmt::kPadId), 0).sum().item<double>();
}

// The same student run (seed, data, steps) with --kd-weight 0 and 1 from one
// teacher of another seed, trained with label smoothing 0.7 so that its
// distributions are broad where the references are one-hot: distillation
// leaves the student at most half as far from the teacher's distribution
// (here about a sixth).
TEST(DistillationTest, StudentLearnsItsTeachersDistribution) {
  Quiet q;
  nmt::set_threads(1);
  const auto dir = nmt::test::temp_dir("train_kd");
  const auto files = nmt::test::write_toy_corpus(dir, 400, 40);
  // label smoothing 0.7: broad distributions, far from the references' (the students smooth by 0.1)
  const std::string teacher_path = train_tiny(files, dir + "/teacher", 150, 0.7);
  std::vector<double> kl;
  for (double w : {0.0, 1.0}) {
    auto o = base_options(files, dir + "/student" + std::to_string(static_cast<int>(w)));
    o.seed = 7;
    o.max_steps = 100;
    o.valid_every = 1000;
    o.kd_teachers = {teacher_path};
    o.kd_weight = w;
    ASSERT_EQ(nmt::train(o, toy_tok(), tiny_arch(0.1)).steps, 100);
    auto m = nmt::load_checkpoint(o.output_dir + "/last.ckpt", torch::kCPU);
    const nmt::Teachers teacher({teacher_path}, m.src_tok, m.tgt_tok, torch::kCPU);
    kl.push_back(divergence(teacher, m, valid_batch(m, files)));
  }
  EXPECT_LT(kl[1], 0.5 * kl[0]) << "KL(teacher || student): weight 0 " << kl[0] << ", weight 1 " << kl[1];
}

// Two teachers' distribution is their log-probabilities' mean, normalized
// again: for a teacher taken twice, its own.
TEST(DistillationTest, TwoCopiesOfATeacherAreThatTeacher) {
  Quiet q;
  nmt::set_threads(1);
  const auto dir = nmt::test::temp_dir("train_kd_two");
  const auto files = nmt::test::write_toy_corpus(dir, 100, 20);
  const std::string path = train_tiny(files, dir + "/teacher", 20);
  auto m = nmt::load_checkpoint(path, torch::kCPU);
  const auto b = valid_batch(m, files);
  const auto one = nmt::Teachers({path}, m.src_tok, m.tgt_tok, torch::kCPU).log_probs(b);
  const auto two = nmt::Teachers({path, path}, m.src_tok, m.tgt_tok, torch::kCPU).log_probs(b);
  EXPECT_FALSE(two.requires_grad());
  // (a + a) / 2 is a exactly; the second log-softmax moves each value by
  // the rounding of log sum exp(a) (about 0 for normalized rows): within
  // gamma_{V+3} (|a| + 1) per element.
  const int64_t V = one.size(2);
  EXPECT_TRUE(nmt::test::within(two, one, nmt::test::gamma(V + 3, 0x1p-24) * (one.abs() + 1)));
}

TEST(DistillationTest, TeacherOfOtherVocabulariesIsRefused) {
  Quiet q;
  nmt::set_threads(1);
  const auto dir = nmt::test::temp_dir("train_kd_vocab");
  const auto files = nmt::test::write_toy_corpus(dir, 100, 20);
  nmt::TokenizerOptions own;  // SentencePiece trained on the toy corpus: not the toy tokenizer
  own.vocab_size = 40;
  auto o = base_options(files, dir + "/student");
  o.max_steps = 5;
  o.kd_teachers = {train_tiny(files, dir + "/teacher", 5, 0.1, &own)};
  const std::string msg = nmt::test::error_of([&] { nmt::train(o, toy_tok(), tiny_arch(0.0)); });
  EXPECT_NE(msg.find("--kd-teachers: " + o.kd_teachers[0]), std::string::npos) << msg;
  EXPECT_NE(msg.find("SentencePiece model is not this run's"), std::string::npos) << msg;
  o.output_dir = dir + "/student2";
  o.kd_teachers = {dir + "/missing.ckpt"};
  const std::string missing = nmt::test::error_of([&] { nmt::train(o, toy_tok(), tiny_arch(0.0)); });
  EXPECT_NE(missing.find(dir + "/missing.ckpt"), std::string::npos) << missing;
}

TEST(DistillationTest, ConflictingOptionsAreRefused) {
  nmt::TrainOptions o;
  o.train_src = "a";
  o.train_tgt = "b";
  o.kd_teachers = {"t.ckpt"};
  EXPECT_NO_THROW(o.validate());
  o.r_drop = 1;
  EXPECT_THROW(o.validate(), nmt::UsageError);
  o.r_drop = 0;
  o.cuda_graphs = true;
  EXPECT_THROW(o.validate(), nmt::UsageError);
  o.cuda_graphs = false;
  o.kd_weight = 1.5;
  EXPECT_THROW(o.validate(), nmt::UsageError);
}

}  // namespace
