// Helpers of the trainer's tests; see trainer_util.h.
#include "trainer_util.h"

#include <torch/torch.h>

#include <fstream>
#include <numeric>

#include "model/model.h"
#include "train/trainer.h"

namespace nmt::test {

nmt::TrainOptions base_options(const ToyFiles& f, const std::string& out) {
  nmt::TrainOptions o;
  o.train_src = f.train_src;
  o.train_tgt = f.train_tgt;
  o.valid_src = f.valid_src;
  o.valid_tgt = f.valid_tgt;
  o.output_dir = out;
  o.batch_tokens = 300;
  o.learning_rate = 1e-2;
  o.max_epochs = 1000;
  o.early_stopping = 0;
  o.lr_patience = 1000;
  o.stop_metric = nmt::StopMetric::kLoss;
  o.log_every = 0;
  o.runtime.device = "cpu";
  o.runtime.threads = 1;
  o.seed = 3;
  return o;
}

nmt::ModelOptions tiny_arch(double dropout) {
  auto m = nmt::test::tiny_model();
  m.dropout = dropout;
  return m;
}

nmt::TokenizerOptions toy_tok() {
  nmt::TokenizerOptions t;
  t.src_model = t.tgt_model = nmt::test::toy_tokenizer_file();
  return t;
}

nmt::Batch valid_batch(const nmt::LoadedModel& m, const ToyFiles& f, size_t n) {
  const auto src = read_all_lines(f.valid_src), tgt = read_all_lines(f.valid_tgt);
  std::vector<nmt::Example> ex(n);
  for (size_t i = 0; i < ex.size(); ++i) {
    ex[i].src = m.src_tok.encode(src.at(i));
    ex[i].src.push_back(nmt::kEosId);
    ex[i].tgt = m.tgt_tok.encode(tgt.at(i));
  }
  std::vector<int64_t> all(ex.size());
  std::iota(all.begin(), all.end(), 0);
  return nmt::make_batch(ex, all);
}

std::string train_tiny(const ToyFiles& f, const std::string& out, int64_t steps, double eps,
                       const nmt::TokenizerOptions* tok) {
  auto o = base_options(f, out);
  o.max_steps = steps;
  o.valid_every = 1000;
  o.label_smoothing = eps;
  nmt::train(o, tok ? *tok : toy_tok(), tiny_arch(0.0));
  return out + "/last.ckpt";
}

std::vector<std::string> read_all_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

std::vector<double> valid_figures(const std::string& run_dir, const std::string& key) {
  const std::string field = "\"" + key + "\":";
  std::vector<double> figures;
  for (const auto& line : read_all_lines(run_dir + "/metrics.jsonl")) {
    const auto at = line.find(field);
    if (line.find("\"type\":\"valid\"") != std::string::npos && at != std::string::npos)
      figures.push_back(std::stod(line.substr(at + field.size())));
  }
  return figures;
}

void expect_same_weights(nmt::Seq2Seq& a, nmt::Seq2Seq& b, const std::string& what) {
  auto pa = a->named_parameters();
  auto pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  int differ = 0;
  for (const auto& p : pa) {
    ASSERT_TRUE(pb.contains(p.key())) << p.key();
    if (!torch::equal(p.value(), pb[p.key()])) {
      ++differ;
      ADD_FAILURE() << what << ": parameter " << p.key() << " differs (max abs diff "
                    << (p.value() - pb[p.key()]).abs().max().item<double>() << ")";
    }
  }
  EXPECT_EQ(differ, 0);
}

}  // namespace nmt::test
