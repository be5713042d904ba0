// The lab programs (MASE's labs 0-3), built as one multi-call executable, qnum-labs: each
// lab's `run` is its main, reached through a link named after the lab (build/bin/lab1-prune
// -> qnum-labs) or as `qnum-labs lab1-prune ...`. One executable because every lab
// instantiates the same model, training and search stack: compiled together (one unity
// translation unit, apps/CMakeLists.txt) they cost about what one lab costs alone.
#pragma once

#include <array>
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

}  // namespace qnum::labs
