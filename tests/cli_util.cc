// Helpers of the tests that run the real executables; see cli_util.h.
#include "cli_util.h"

#include <sstream>

namespace nmt::test {

std::string train_args(const ToyFiles& f, const std::string& out) {
  return "--train-src " + quote(f.train_src) + " --train-tgt " + quote(f.train_tgt) + " --valid-src " +
         quote(f.valid_src) + " --valid-tgt " + quote(f.valid_tgt) + " -o " + quote(out) +
         " --emb-dim 16 --enc-hidden 16 --dec-hidden 32 --attn-dim 16 --vocab-size 60 --threads 1 --device cpu"
         " --batch-tokens 300";
}

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

std::vector<std::string> split_bars(const std::string& line) {
  std::vector<std::string> f;
  size_t pos = 0;
  while (true) {
    size_t bar = line.find(" ||| ", pos);
    f.push_back(line.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos));
    if (bar == std::string::npos) return f;
    pos = bar + 5;
  }
}

}  // namespace nmt::test
