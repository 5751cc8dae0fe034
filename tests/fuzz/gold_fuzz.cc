// Fuzzes the Pharaoh / gold-alignment reader and the AER computation.
#include <cstdint>
#include <sstream>
#include <string>

#include "base/error.h"
#include "text/alignment.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string line;
  std::vector<nmt::GoldAlignment> gold;
  std::vector<std::set<nmt::Link>> hyp;
  int64_t n = 0;
  while (std::getline(in, line)) {
    for (bool one_based : {false, true}) {
      try {
        auto g = nmt::parse_gold_line(line, "fuzz", ++n, one_based);
        for (const auto& l : g.sure)
          if (!g.possible.count(l) || l.first < 0 || l.second < 0) __builtin_trap();
        hyp.push_back(g.possible);
        gold.push_back(std::move(g));
      } catch (const nmt::Error&) {
      }
    }
  }
  const auto s = nmt::alignment_error_rate(hyp, gold);
  if (s.aer() < -1e-9 || s.aer() > 1 + 1e-9 || s.precision() > 1 + 1e-9 || s.recall() > 1 + 1e-9) __builtin_trap();
  nmt::to_pharaoh(hyp.empty() ? std::set<nmt::Link>{} : hyp.front());
  return 0;
}
