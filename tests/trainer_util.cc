// Helpers of the trainer's tests; see trainer_util.h.
#include "trainer_util.h"

#include <torch/torch.h>

#include <fstream>

#include "model/model.h"

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
