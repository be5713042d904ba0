// The lab programs (MASE's labs 0-3), part of the `qnum` executable: each lab's `run` is its
// main, reached through a link named after the lab (build/bin/lab1-prune -> qnum) or as
// `qnum lab lab1-prune ...`. Part of qnum because every lab instantiates the same model,
// training and search stack as the command line: compiled together (one unity translation
// unit, apps/CMakeLists.txt) the nine labs add little to what `qnum` costs alone.
#pragma once

#include <array>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>

namespace qnum::labs {

namespace lab0_graph { int run(int argc, char** argv); }
namespace lab0_lora { int run(int argc, char** argv); }
namespace lab1_ptq_qat { int run(int argc, char** argv); }
namespace lab1_prune { int run(int argc, char** argv); }
namespace lab1_sweep { int run(int argc, char** argv); }
namespace lab2_nas { int run(int argc, char** argv); }
namespace lab2_compression { int run(int argc, char** argv); }
namespace lab3_mixed_precision { int run(int argc, char** argv); }
namespace lab3_format_search { int run(int argc, char** argv); }

/// One lab program: the name it is called by, its entry point, and what it does.
struct LabProgram {
  std::string_view name;
  int (*run)(int argc, char** argv);
  std::string_view summary;
};

inline constexpr std::array kLabPrograms{
    LabProgram{"lab0-graph", lab0_graph::run, "BERT's op graph with and without mask and labels; dropout removal"},
    LabProgram{"lab0-lora", lab0_lora::run, "full fine-tuning vs LoRA: trainable parameters, fusing"},
    LabProgram{"lab1-ptq-qat", lab1_ptq_qat::run, "PTQ vs QAT accuracy over fixed-point widths on every Linear"},
    LabProgram{"lab1-prune", lab1_prune::run, "pruning over sparsities + fine-tuning, random vs l1-norm"},
    LabProgram{"lab1-sweep", lab1_sweep::run, "accuracy vs batch size, epochs and learning rate"},
    LabProgram{"lab2-nas", lab2_nas::run, "NAS-BERT search: best accuracy so far per sampler"},
    LabProgram{"lab2-compression", lab2_compression::run, "NAS vs compressed vs compressed + post-training"},
    LabProgram{"lab3-mixed-precision", lab3_mixed_precision::run, "per-layer integer width/frac search"},
    LabProgram{"lab3-format-search", lab3_format_search::run, "per-layer format family search"},
};

inline const LabProgram* find_lab(std::string_view name) {
  for (const auto& lab : kLabPrograms)
    if (lab.name == name) return &lab;
  return nullptr;
}

inline void print_labs(std::FILE* out) {
  std::fprintf(out, "qnum lab: MASE's labs 0-3. Run one as `qnum lab <lab> [options]` or through its link\n"
                    "`<lab> [options]` (beside qnum); `<lab> --help` lists its options.\n\nlabs:\n");
  for (const auto& lab : kLabPrograms)
    std::fprintf(out, "  %-22.*s %.*s\n", static_cast<int>(lab.name.size()), lab.name.data(),
                 static_cast<int>(lab.summary.size()), lab.summary.data());
}

/// The lab `qnum` was asked to run, if any: called through a lab's link (argv[0]), or as
/// `qnum lab <lab> [options]` (`qnum lab` alone or with --help lists the labs). Returns the
/// exit status, or nothing when the command line is not a lab's.
inline std::optional<int> run_if_lab(int argc, char** argv) {
  if (argc < 1 || argv[0] == nullptr) return std::nullopt;
  const char* slash = std::strrchr(argv[0], '/');
  if (const auto* lab = find_lab(slash ? slash + 1 : argv[0])) return lab->run(argc, argv);
  if (argc < 2 || std::string_view(argv[1]) != "lab") return std::nullopt;
  if (argc < 3) {
    print_labs(stderr);
    return 2;
  }
  const std::string_view name = argv[2];
  if (name == "--help" || name == "-h") {
    print_labs(stdout);
    return 0;
  }
  if (const auto* lab = find_lab(name)) return lab->run(argc - 2, argv + 2);
  std::fprintf(stderr, "qnum: error: unknown lab '%s' (`qnum lab --help` lists them)\n", argv[2]);
  return 2;
}

}  // namespace qnum::labs
