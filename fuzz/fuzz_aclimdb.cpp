// aclImdb file names (data/imdb.hpp): up to 8 names, one a line, parsed as <id>_<rating>.txt
// and then created as review files in a scratch aclImdb tree (train/neg, train/pos) that
// read_aclimdb reads back. A name that parses re-parses from its canonical spelling to the
// same id and rating; a tree that reads holds one row per .txt file, ratings 1-10.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "qnum/data/imdb.hpp"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path root = qnum::fuzz::scratch_dir() / ("qnum-fuzz-aclimdb-" + std::to_string(::getpid()));
  std::vector<std::string> names;
  std::string_view text = qnum::fuzz::as_text(data, size);
  while (!text.empty() && names.size() < 8) {
    const auto nl = text.find('\n');
    names.emplace_back(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
  }
  for (const auto& name : names) {
    const auto parsed = qnum::data::parse_aclimdb_name(name);
    if (!parsed) continue;
    qnum::fuzz::check(parsed->first >= 0 && parsed->second >= 1 && parsed->second <= 10, "id >= 0, rating 1-10");
    const auto again =
        qnum::data::parse_aclimdb_name(std::to_string(parsed->first) + "_" + std::to_string(parsed->second) + ".txt");
    qnum::fuzz::check(again == parsed, "canonical name parses the same");
  }

  // The same names as files (those a file system allows), alternately negative and positive.
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root / "train" / "neg");
  fs::create_directories(root / "train" / "pos");
  std::size_t txt_files = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& name = names[i];
    if (name.empty() || name.size() > 200 || name == "." || name == ".." ||
        name.find_first_of(std::string("/\0", 2)) != std::string::npos)
      continue;
    const fs::path p = root / "train" / (i % 2 ? "pos" : "neg") / name;
    if (fs::exists(p)) continue;
    std::ofstream(p) << "review " << i;
    if (p.extension() == ".txt") ++txt_files;
  }
  qnum::fuzz::expect_clean([&] {
    const auto t = qnum::data::read_aclimdb(root, "train");
    qnum::fuzz::check(t.rows.size() == txt_files, "one row per .txt file");
    for (const auto& r : t.rows) qnum::fuzz::check(r.rating >= 1 && r.rating <= 10, "rating 1-10");
  });
  fs::remove_all(root, ec);
  return 0;
}
