// Archives and gzip (io/archive.hpp through libarchive, io/gzip.hpp through zlib): the first
// byte picks gunzip (capped at 1 MiB), read_archive_bytes (from memory, the member reader of
// read_archive_files; capped at 1 MiB) or extract_archive of the bytes as a file into a
// scratch directory. Caps hold; extraction leaves files only under the target (or nothing,
// after an error) and never a temporary directory.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "fuzz_input.hpp"
#include "qnum/io/archive.hpp"
#include "qnum/io/gzip.hpp"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  constexpr std::size_t kCap = std::size_t{1} << 20;
  static const fs::path dir = qnum::fuzz::scratch_dir() / ("qnum-fuzz-archive-" + std::to_string(::getpid()));
  static qnum::fuzz::InputFile file(".archive");
  const auto bytes = qnum::fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      qnum::fuzz::expect_clean(
          [&] { qnum::fuzz::check(qnum::gunzip(bytes, "fuzz.gz", kCap).size() <= kCap, "gunzip cap"); });
      break;
    case 1:
      qnum::fuzz::expect_clean([&] {
        std::size_t total = 0;
        for (const auto& [name, content] : qnum::read_archive_bytes(
                 bytes, "fuzz.archive", [](std::string_view) { return true; }, kCap))
          total += content.size();
        qnum::fuzz::check(total <= kCap, "read_archive_bytes cap");
      });
      break;
    default: {
      const auto& path = file.write(data + 1, size - 1);
      std::error_code ec;
      fs::remove_all(dir, ec);
      fs::create_directories(dir);
      const fs::path dest = dir / "out";
      qnum::fuzz::expect_clean([&] {
        qnum::extract_archive(path, dest, kCap);
        qnum::fuzz::check(fs::is_directory(dest), "extract made the target");
      });
      for (const auto& e : fs::directory_iterator(dir))
        qnum::fuzz::check(e.path() == dest, "extract left nothing beside the target");
      fs::remove_all(dir, ec);
    }
  }
  return 0;
}
