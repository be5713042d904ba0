// Progress output of the trainer on stderr. On a terminal: one line rewritten in place
// (\r) with the epoch, batch i/n and the running loss, at most ~10 times a second, finished
// with the epoch's summary. Otherwise (a pipe, a log file): just the summary line per epoch.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>

#include <unistd.h>

namespace qnum::train {

/// Prints the trainer's progress to stderr (see the file comment). Disabled: prints nothing.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), tty_(enabled && ::isatty(::fileno(stderr)) == 1) {}

  /// Whether per-batch updates are drawn (stderr is a terminal).
  bool interactive() const { return tty_; }

  /// Batch `batch` (1-based) of `batches` of `epoch` done; `loss` is the running mean.
  void batch(int epoch, int max_epochs, std::int64_t batch, std::int64_t batches, double loss) {
    if (!tty_) return;
    const auto now = std::chrono::steady_clock::now();
    if (batch != batches && batch != 1 && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const int width = 24;
    const int filled = static_cast<int>(width * batch / (batches > 0 ? batches : 1));
    std::fprintf(stderr, "\repoch %d/%d [", epoch, max_epochs);
    for (int i = 0; i < width; ++i) std::fputc(i < filled ? '=' : ' ', stderr);
    std::fprintf(stderr, "] batch %lld/%lld loss %.4f\033[K", static_cast<long long>(batch),
                 static_cast<long long>(batches), loss);
    std::fflush(stderr);
  }

  /// The end-of-epoch summary line.
  void epoch(int epoch, int max_epochs, double train_loss, double val_loss, double val_accuracy, double seconds,
             double lr, bool best) {
    if (!enabled_) return;
    std::fprintf(stderr, "%sepoch %d/%d train_loss %.6f val_loss %.6f val_accuracy %.4f lr %.3g %.2fs%s\n",
                 tty_ ? "\r\033[K" : "", epoch, max_epochs, train_loss, val_loss, val_accuracy, lr, seconds,
                 best ? " (best)" : "");
    std::fflush(stderr);
  }

  /// Ends a half-drawn line (before an error message).
  void abort() {
    if (tty_) std::fputs("\n", stderr);
  }

 private:
  bool enabled_;
  bool tty_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace qnum::train
