// lab0-lora: MASE's tutorial 2 / lab 0 on BERT — full fine-tuning against LoRA adapters, with
// the trainable-parameter report, done as LoRA is meant (spec/system.md §5: MASE's version
// trains the base weights too and reads the wrong keys).
//
// There are no pretrained weights here, so the starting model is trained first (the fp32 run
// of TextLab: --epochs from random initialisation, or --load a checkpoint to skip it). Then
// two copies of it are fine-tuned for --finetune-epochs each:
//   full   every parameter trainable (at --finetune-learning-rate);
//   lora   adapters of --rank (scaling --alpha / rank, --lora-dropout) on every Linear that
//          --target matches (default: every Linear of the BERT body, as MASE inserts them; the
//          classifier head has 2 outputs, fewer than any useful rank), everything else frozen —
//          base weights and biases (at --lora-learning-rate);
// and each is evaluated on the test split. The LoRA model is then fused (W += alpha/r·B·A),
// re-evaluated, and its logits compared with the adapted model's on the first test batch.
// Writes results.csv (method,epoch,trainable_parameters,val_accuracy: epoch 0 is the start),
// summary.csv (per method: trainable and total parameters, test accuracy; LoRA fused too),
// trainable-<method>.txt (the report per module), plot.gp/plot.png.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "labs.hpp"
#include "lab_text.hpp"
#include "qnum/passes/lora.hpp"

namespace qnum::labs::lab0_lora {

using qnum::labs::LabBase;
using qnum::labs::TextLab;
namespace passes = qnum::passes;

/// max |adapted - fused| logits on the first test batch.
double fused_logit_gap(const TextLab& lab, const std::shared_ptr<TextLab::Model>& adapted,
                       const std::shared_ptr<TextLab::Model>& fused) {
  qnum::autograd::NoGradGuard no_grad;
  adapted->eval();
  fused->eval();
  const auto b = qnum::data::batches(lab.data().test, {64, false, false, 0, 1})[0];
  const qnum::models::BertInput in{b.batch_size, b.seq_len, b.input_ids, b.attention_mask, b.token_type_ids};
  const auto ya = adapted->forward(in), yf = fused->forward(in);
  double gap = 0;
  for (std::size_t i = 0; i < ya.values().size(); ++i)
    gap = std::max(gap, std::abs(static_cast<double>(ya.values()[i]) - yf.values()[i]));
  return gap;
}


int run(int argc, char** argv) {
  CLI::App app{"MASE lab 0 on BERT: full fine-tuning vs LoRA adapters, trainable parameters, fusing", "lab0-lora"};
  qnum::labs::CommonOptions common;
  common.model = "bert-tiny";
  qnum::labs::TextOptions text;
  std::string load, target = R"(bert\..*)";
  int finetune_epochs = 1;
  std::int64_t rank = 8;
  double alpha = 0, lora_dropout = 0, lora_learning_rate = 1e-3;
  qnum::labs::add_common_options(app, common);
  qnum::labs::add_text_options(app, text);
  app.add_option("--load", load, "start from this checkpoint (qnum or Hugging Face) instead of training --epochs");
  app.add_option("--finetune-epochs", finetune_epochs, "fine-tuning epochs of each method")->capture_default_str();
  app.add_option("--rank", rank, "LoRA rank")->capture_default_str();
  app.add_option("--alpha", alpha, "LoRA alpha (scaling alpha/rank; default: rank, scaling 1)");
  app.add_option("--lora-dropout", lora_dropout, "dropout on the adapters' input")->capture_default_str();
  app.add_option("--lora-learning-rate", lora_learning_rate, "AdamW learning rate of the LoRA run")
      ->capture_default_str();
  app.add_option("--target", target, "regex over module paths of the Linears that get adapters (default: all but the classifier head)")->capture_default_str();

  return qnum::labs::run_main(app, argc, argv, [&] {
    using qnum::detail::require;
    require(qnum::labs::is_text_lab(common), "lab0-lora runs BERT models, not '", common.model, "'");
    require(finetune_epochs >= 1, "--finetune-epochs must be >= 1, got ", finetune_epochs);
    require(std::isfinite(lora_learning_rate) && lora_learning_rate > 0, "--lora-learning-rate must be > 0, got ",
            lora_learning_rate);
    passes::LoraConfig lc;
    lc.rank = rank;
    lc.alpha = alpha;
    lc.dropout = lora_dropout;
    lc.target = target;
    lc.seed = common.seed;
    require(rank >= 1, "--rank must be >= 1, got ", rank);
    require(alpha >= 0, "--alpha must be > 0, got ", alpha);
    require(lora_dropout >= 0 && lora_dropout < 1, "--lora-dropout must be in [0, 1), got ", lora_dropout);
    qnum::labs::apply_text_defaults(app, common);
    TextLab lab("lab0-lora", common, text);
    passes::insert_lora(*lab.fresh_model(), lc);  // a bad rank or target fails before training
    const double start = load.empty() ? lab.train_fp32() : lab.load_start(load);
    const double start_val = lab.val_accuracy(lab.trained_copy());

    std::string csv = "method,epoch,trainable_parameters,val_accuracy\n";
    std::string summary = "method,trainable_parameters,total_parameters,test_accuracy\nstart," +
                          std::to_string(lab.trained_copy()->num_parameters()) + "," +
                          std::to_string(lab.trained_copy()->num_parameters()) + "," + LabBase::fmt(start, 6) + "\n";
    auto curve = [&](const std::string& method, std::int64_t trainable,
                     const std::vector<qnum::train::EpochRecord>& history) {
      csv += method + ",0," + std::to_string(trainable) + "," + LabBase::fmt(start_val, 6) + "\n";
      for (const auto& r : history)
        csv += method + "," + std::to_string(r.epoch) + "," + std::to_string(trainable) + "," +
               LabBase::fmt(r.val_accuracy, 6) + "\n";
    };

    // Full fine-tuning.
    auto full = lab.trained_copy();
    const auto full_report = passes::trainable_parameters(*full);
    qnum::write_file_atomic(lab.dir() / "trainable-full.txt", full_report.table());
    curve("full", full_report.trainable(), lab.finetune(full, "full", finetune_epochs));
    const double full_test = lab.test_accuracy(full);
    summary += "full," + std::to_string(full_report.trainable()) + "," + std::to_string(full_report.total()) + "," +
               LabBase::fmt(full_test, 6) + "\n";
    lab.note("full fine-tuning: " + std::to_string(full_report.trainable()) + " trainable parameters, test accuracy " +
             LabBase::fmt(full_test));

    // LoRA: adapters, everything else frozen.
    auto lora = lab.trained_copy();
    const auto lora_report = passes::insert_lora(*lora, lc);
    qnum::write_file_atomic(lab.dir() / "trainable-lora.txt", lora_report.table());
    curve("lora", lora_report.trainable(), lab.finetune(lora, "lora", finetune_epochs, lora_learning_rate));
    const double lora_test = lab.test_accuracy(lora);
    summary += "lora," + std::to_string(lora_report.trainable()) + "," + std::to_string(lora_report.total()) + "," +
               LabBase::fmt(lora_test, 6) + "\n";

    // Fused: a copy of the adapted model with the adapters folded into the base weights (the
    // model back to its plain size), compared with the adapted one.
    auto fused = lab.trained_copy();
    passes::insert_lora(*fused, lc);
    fused->load_state_dict(lora->state_dict());
    const std::size_t n_fused = passes::fuse_lora(*fused);
    const double gap = fused_logit_gap(lab, lora, fused);
    const double fused_test = lab.test_accuracy(fused);
    summary += "lora-fused," + std::to_string(passes::trainable_parameters(*fused).trainable()) + "," +
               std::to_string(fused->num_parameters()) + "," + LabBase::fmt(fused_test, 6) + "\n";
    lab.note("LoRA rank " + std::to_string(rank) + ": " + std::to_string(lora_report.trainable()) + " of " +
             std::to_string(lora_report.total()) + " parameters trainable, test accuracy " + LabBase::fmt(lora_test) +
             "; fused " + std::to_string(n_fused) + " adapters: test accuracy " + LabBase::fmt(fused_test) +
             ", max |logit diff| " + LabBase::fmt(gap, 9));

    qnum::write_file_atomic(lab.dir() / "summary.csv", summary);
    const auto& o = lab.options();
    const std::string script =
        qnum::labs::gnuplot_preamble("lab0-lora: validation accuracy per fine-tuning epoch (results.csv)") +
        "set title \"" + o.model + " on " + o.dataset + ": full fine-tuning vs LoRA rank " + std::to_string(rank) +
        "\"\n"
        "set xlabel \"fine-tuning epoch (0: the starting model)\"\n"
        "set ylabel \"validation accuracy\"\n"
        "set xtics 1\n"
        "plot \"results.csv\" skip 1 using 2:(strcol(1) eq \"full\" ? $4 : NaN) with linespoints pt 7 title "
        "sprintf(\"full (%d trainable)\", " +
        std::to_string(full_report.trainable()) +
        "), \\\n"
        "     \"\" skip 1 using 2:(strcol(1) eq \"lora\" ? $4 : NaN) with linespoints pt 5 title "
        "sprintf(\"LoRA (%d trainable)\", " +
        std::to_string(lora_report.trainable()) + ")\n";
    const auto plot = qnum::labs::write_results(lab.dir(), csv, script, "lab0-lora");

    std::printf("lab0-lora  %s on %s, start: test accuracy %.4f (%s), fine-tune %d epoch%s, seed %llu\n\n",
                o.model.c_str(), o.dataset.c_str(), start, load.empty() ? "trained here" : load.c_str(),
                finetune_epochs, finetune_epochs == 1 ? "" : "s", static_cast<unsigned long long>(o.seed));
    std::printf("%-11s %20s %18s %14s\n", "method", "trainable_parameters", "total_parameters", "test_accuracy");
    std::printf("%-11s %20lld %18lld %14.4f\n", "full", static_cast<long long>(full_report.trainable()),
                static_cast<long long>(full_report.total()), full_test);
    std::printf("%-11s %20lld %18lld %14.4f\n", "lora", static_cast<long long>(lora_report.trainable()),
                static_cast<long long>(lora_report.total()), lora_test);
    std::printf("%-11s %20lld %18lld %14.4f\n", "lora-fused",
                static_cast<long long>(passes::trainable_parameters(*fused).trainable()),
                static_cast<long long>(fused->num_parameters()), fused_test);
    std::printf("\nfused %zu adapters; adapted vs fused logits on a test batch: max |diff| %.3g\n", n_fused, gap);
    std::printf("results  %s\nsummary  %s\ntrainable %s, %s\n", (lab.dir() / "results.csv").string().c_str(),
                (lab.dir() / "summary.csv").string().c_str(), (lab.dir() / "trainable-full.txt").string().c_str(),
                (lab.dir() / "trainable-lora.txt").string().c_str());
    std::printf("plot     %s\n", plot == qnum::labs::PlotResult::written ? (lab.dir() / "plot.png").string().c_str()
                                                                         : "(not drawn: gnuplot missing)");
  });
}

}  // namespace qnum::labs::lab0_lora
