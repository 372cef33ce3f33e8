#include "trlhpc/train/metrics_logger.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

TensorBoardScalars tensorboard_scalars(const nlohmann::json& line) {
  TensorBoardScalars scalars;
  for (const auto& [key, value] : line.items()) {
    if (key == "step" || !value.is_number()) continue;
    const bool eval = key.rfind("eval_", 0) == 0, test = key.rfind("test_", 0) == 0;
    scalars.emplace_back(eval ? "eval/" + key.substr(5) : test ? "test/" + key.substr(5) : "train/" + key,
                         value.get<double>());
  }
  return scalars;
}

MetricsLogger::MetricsLogger(const std::string& output_dir, bool enabled, bool may_redraw,
                             const std::string& tensorboard_dir)
    : enabled_(enabled), tty_(enabled && may_redraw && isatty(STDOUT_FILENO)) {
  if (!enabled_) return;
  if (!tensorboard_dir.empty()) tensorboard_ = std::make_unique<TensorBoardWriter>(tensorboard_dir);
  std::error_code error;
  std::filesystem::create_directories(output_dir, error);
  if (error && !std::filesystem::is_directory(output_dir))
    throw UserError("--output_dir " + output_dir + " cannot be created (" + error.message() + "): choose a writable folder");
  path_ = (std::filesystem::path(output_dir) / "metrics.jsonl").string();
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) throw UserError("cannot write " + path_ + ": check that --output_dir is writable");
}

void MetricsLogger::forget_after(int64_t step) {
  if (!enabled_) return;
  std::fclose(file_);
  file_ = nullptr;
  std::ifstream in(path_);
  std::string kept, line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || j.value("step", int64_t{0}) <= step) kept += line + "\n";
  }
  in.close();
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
  }
  std::filesystem::rename(tmp, path_);
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) throw UserError("cannot write " + path_ + ": check that --output_dir is writable");
}

MetricsLogger::~MetricsLogger() {
  if (file_) std::fclose(file_);
}

void MetricsLogger::write_line(const nlohmann::json& j) {
  const std::string line = j.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
  if (tensorboard_) tensorboard_->add_scalars(j.at("step").get<int64_t>(), tensorboard_scalars(j));
}

namespace {
// This process's (global rank 0's) peak resident memory: the host memory a rank needs, what a job's
// --mem request must cover.
double peak_resident_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8) return "?";
  const long s = static_cast<long>(seconds);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return buffer;
}

// `v` printed with `format` (one %f conversion), or "-" when it is not a finite number.
std::string shown(double v, const char* format) {
  if (!std::isfinite(v)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}
}  // namespace

void MetricsLogger::log_step(const StepMetrics& m) {
  if (!enabled_) return;
  nlohmann::json line = {{"step", m.step},
                         {"loss", m.loss},
                         {"grad_norm", m.grad_norm},
                         {"learning_rate", m.learning_rate},
                         {"num_tokens", m.num_tokens},
                         {"tokens_per_second", m.tokens_per_second},
                         {"mfu", m.mfu},
                         {"mfu_of_gemm_rate", m.mfu_of_gemm_rate ? nlohmann::json(*m.mfu_of_gemm_rate) : nlohmann::json()},
                         {"epoch", m.epoch}};
  line["peak_memory_mib"] = peak_resident_mib();
  if (m.skipped_steps > 0) line["skipped_steps"] = m.skipped_steps;  // --skip_nonfinite_steps
  if (m.entropy) line["entropy"] = *m.entropy;
  if (m.mean_token_accuracy) line["mean_token_accuracy"] = *m.mean_token_accuracy;
  write_line(line);
  // A window of skipped steps only has no loss, rate or MFU: "-" rather than "-nan".
  const std::string of_gemm =
      m.mfu_of_gemm_rate ? " (" + shown(100.0 * *m.mfu_of_gemm_rate, "%.1f%%") + " of GEMM rate)" : std::string();
  std::printf("%sstep %lld/%lld  loss %s  grad_norm %s  lr %.3e  %s tok/s  MFU %s%s  ETA %s%s", tty_ ? "\r\033[K" : "",
              static_cast<long long>(m.step), static_cast<long long>(m.total_steps), shown(m.loss, "%.4f").c_str(),
              shown(m.grad_norm, "%.3f").c_str(), m.learning_rate, shown(m.tokens_per_second, "%.0f").c_str(),
              shown(100.0 * m.mfu, "%.1f%%").c_str(), of_gemm.c_str(), format_duration(m.seconds_left).c_str(),
              tty_ ? "" : "\n");
  std::fflush(stdout);
  progress_shown_ = tty_;
}

void MetricsLogger::log_eval(int64_t step, const EvalMetrics& eval, double epoch) {
  if (!enabled_) return;
  nlohmann::json line = {{"step", step}, {"eval_loss", eval.loss}};
  if (eval.entropy) line["eval_entropy"] = *eval.entropy;
  if (eval.mean_token_accuracy) line["eval_mean_token_accuracy"] = *eval.mean_token_accuracy;
  line["epoch"] = epoch;
  write_line(line);
  message("eval step " + std::to_string(step) + ": eval_loss " + std::to_string(eval.loss) +
          (eval.mean_token_accuracy ? ", eval_mean_token_accuracy " + std::to_string(*eval.mean_token_accuracy) : ""));
}

void MetricsLogger::message(const std::string& text) {
  if (!enabled_) return;
  std::printf("%s%s\n", progress_shown_ ? "\r\033[K" : "", text.c_str());
  std::fflush(stdout);
  progress_shown_ = false;
}

void MetricsLogger::finish() {
  if (enabled_ && progress_shown_) std::printf("\n");
  progress_shown_ = false;
}

}  // namespace trlhpc
