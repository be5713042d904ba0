// qnum-labs: the entry of the lab programs (labs.hpp). Called through a lab's link
// (lab1-prune --model jsc-s ...) it runs that lab; `qnum-labs <lab> [options]` does the same;
// `qnum-labs` alone (or --help) lists the labs.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "labs.hpp"

namespace {

const qnum::labs::LabProgram* find_lab(std::string_view name) {
  for (const auto& lab : qnum::labs::kLabPrograms)
    if (lab.name == name) return &lab;
  return nullptr;
}

void print_labs(std::FILE* out) {
  std::fprintf(out, "qnum-labs: MASE's labs 0-3 on qnum. Run one as `<lab> [options]` (a link to qnum-labs)\n"
                    "or `qnum-labs <lab> [options]`; `<lab> --help` lists its options.\n\nlabs:\n");
  for (const auto& lab : qnum::labs::kLabPrograms)
    std::fprintf(out, "  %-22.*s %.*s\n", static_cast<int>(lab.name.size()), lab.name.data(),
                 static_cast<int>(lab.summary.size()), lab.summary.data());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 1 || argv[0] == nullptr) return 2;
  const char* slash = std::strrchr(argv[0], '/');
  if (const auto* lab = find_lab(slash ? slash + 1 : argv[0])) return lab->run(argc, argv);
  if (argc < 2) {
    print_labs(stderr);
    return 2;
  }
  const std::string_view first = argv[1];
  if (first == "--help" || first == "-h") {
    print_labs(stdout);
    return 0;
  }
  if (const auto* lab = find_lab(first)) return lab->run(argc - 1, argv + 1);
  std::fprintf(stderr, "qnum-labs: error: unknown lab '%s' (`qnum-labs --help` lists them)\n", argv[1]);
  return 2;
}
