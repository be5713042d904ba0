// WordPiece tokenization speed on the IMDb train split (25,000 reviews, 33 MB) when
// QNUM_DATA_DIR has imdb/train.tsv.gz and bert/vocab.txt, else on 25,000 text-synthetic
// reviews with their own vocabulary (the label says which). One thread. Reports reviews/s
// and input bytes/s for: the basic tokenizer alone (words), full WordPiece ids, and the whole
// load of the split (gunzip + TSV parse + [CLS]/[SEP] ids truncated to 512).
// The Hugging Face baseline on the same texts: bench/tokenize_baseline.py.
//   QNUM_DATA_DIR=/work/shared/data ./qnum-bench --benchmark_filter=Tokenize
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "qnum/data/text.hpp"

namespace {

namespace fs = std::filesystem;

struct Corpus {
  std::unique_ptr<qnum::data::WordPieceTokenizer> tok;
  qnum::data::TextTable table;
  fs::path tsv;  ///< empty for the synthetic corpus
  std::int64_t bytes = 0;
  std::string label;
};

const Corpus& corpus() {
  static const Corpus c = [] {
    Corpus c;
    const char* d = std::getenv("QNUM_DATA_DIR");
    const fs::path dir = d ? d : "";
    if (d && fs::is_regular_file(dir / "imdb" / "train.tsv.gz") && fs::is_regular_file(dir / "bert" / "vocab.txt")) {
      c.tok = std::make_unique<qnum::data::WordPieceTokenizer>(
          qnum::data::WordPieceTokenizer::from_file(dir / "bert" / "vocab.txt"));
      c.tsv = dir / "imdb" / "train.tsv.gz";
      c.table = qnum::data::read_imdb_tsv(c.tsv);
      c.label = "imdb-train";
    } else {
      c.tok = std::make_unique<qnum::data::WordPieceTokenizer>(qnum::data::text_synthetic_vocab());
      c.table = qnum::data::text_synthetic_table(25000, 0, 0);
      c.label = "text-synthetic (set QNUM_DATA_DIR for IMDb)";
    }
    for (const auto& r : c.table.rows) c.bytes += static_cast<std::int64_t>(r.text.size());
    return c;
  }();
  return c;
}

void report(benchmark::State& state, const Corpus& c) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * c.table.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * c.bytes);
  state.SetLabel(c.label);
}

void bm_basic(benchmark::State& state) {
  const auto& c = corpus();
  std::int64_t words = 0;
  for (auto _ : state) {
    for (const auto& r : c.table.rows)
      c.tok->for_each_word(r.text, nullptr, [&](std::string_view, std::size_t, std::int32_t) { ++words; });
    benchmark::DoNotOptimize(words);
  }
  state.counters["words"] = static_cast<double>(words) / static_cast<double>(state.iterations());
  report(state, c);
}

void bm_wordpiece(benchmark::State& state) {
  const auto& c = corpus();
  std::vector<std::int32_t> ids;
  std::int64_t tokens = 0;
  for (auto _ : state) {
    tokens = 0;
    for (const auto& r : c.table.rows) {
      ids.clear();
      c.tok->append_ids(r.text, ids);
      tokens += static_cast<std::int64_t>(ids.size());
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens"] = static_cast<double>(tokens);
  report(state, c);
}

void bm_load_split(benchmark::State& state) {
  const auto& c = corpus();
  for (auto _ : state) {
    const auto table = c.tsv.empty() ? c.table : qnum::data::read_imdb_tsv(c.tsv);
    auto d = qnum::data::tokenize_table(table, *c.tok, 512);
    benchmark::DoNotOptimize(d.tokens.data());
  }
  report(state, c);
}

BENCHMARK(bm_basic)->Name("TokenizeBasic")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(bm_wordpiece)->Name("TokenizeWordPiece")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(bm_load_split)->Name("TokenizeLoadTrainSplit")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
