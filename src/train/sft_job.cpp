#include "trlhpc/train/sft_job.hpp"

#include <mpi.h>
#include <omp.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <stdexcept>
#include <filesystem>
#include <memory>
#include <optional>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/batching/sampler.hpp"
#include "trlhpc/data/dataset/cache.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"
#include "trlhpc/io/hf_model_dir.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/optim/lr_scheduler.hpp"
#include "trlhpc/parallel/process_groups.hpp"
#include "trlhpc/runtime/cpu_blas.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/runtime/topology.hpp"
#include "trlhpc/train/flops.hpp"
#include "trlhpc/train/metrics_logger.hpp"
#include "trlhpc/train/model_export.hpp"
#include "trlhpc/train/trainer.hpp"

extern "C" void openblas_set_num_threads(int);

namespace trlhpc {

using batching::DistributedSampler;
using batching::SamplerConfig;
using batching::SamplerPosition;
using dataset::dataset_cache_key;
using dataset::dataset_cache_path;
using dataset::read_dataset_cache;
using dataset::SftDataOptions;
using dataset::SftDataset;
using dataset::SftDataStats;
using dataset::SftTokenizedExamples;
using dataset::write_dataset_cache;
using tokenizer::Tokenizer;

namespace {

using Clock = std::chrono::steady_clock;

std::optional<bool> tri_state(const std::string& value, const char* option) {
  if (value == "auto" || value.empty()) return std::nullopt;
  if (value == "true" || value == "1" || value == "True") return true;
  if (value == "false" || value == "0" || value == "False") return false;
  throw UserError(std::string("--") + option + " " + value + ": use true, false or auto");
}

bool has_tokenizer_files(const std::string& dir) {
  namespace fs = std::filesystem;
  return !dir.empty() && (fs::exists(fs::path(dir) / "tokenizer.json") || fs::exists(fs::path(dir) / "vocab.json"));
}

ModelConfig load_model_config(const SftConfig& c) {
  if (!c.model_name_or_path.empty() && !c.model_config.empty())
    throw UserError("give either --model_name_or_path or --model_config, not both");
  if (!c.model_name_or_path.empty()) return ModelConfig::from_file(c.model_name_or_path + "/config.json");
  if (!c.model_config.empty()) return ModelConfig::from_file(c.model_config);
  throw UserError("no model: pass --model_name_or_path DIR (a Hugging Face directory) or --model_config FILE");
}

SftDataOptions data_options(const SftConfig& c, const std::string& dataset, const std::string& tokenizer_dir) {
  SftDataOptions o;
  o.dataset_name = dataset;
  o.split = c.dataset_train_split;
  o.text_field = c.dataset_text_field;
  o.tokenizer_dir = tokenizer_dir;
  o.chat_template_path = c.chat_template_path;
  o.max_length = c.max_length;
  o.packing = c.packing;
  o.packing_strategy = c.packing_strategy;
  o.padding_free = c.padding_free;
  o.pad_to_multiple_of = c.pad_to_multiple_of;
  o.completion_only_loss = tri_state(c.completion_only_loss, "completion_only_loss");
  o.assistant_only_loss = c.assistant_only_loss;
  o.skip_bad_rows = c.skip_bad_rows;
  o.shuffle = c.shuffle_dataset;
  o.seed = c.seed;
  return o;
}

std::string mib(int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buffer;
}

void broadcast_string(std::string& s) {
  uint64_t size = s.size();
  MPI_Bcast(&size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  s.resize(size);
  if (size > 0) MPI_Bcast(s.data(), static_cast<int>(size), MPI_CHAR, 0, MPI_COMM_WORLD);
}

// The dataset, through the preprocessing cache (dataset_cache.hpp): global rank 0 loads or tokenizes the
// examples and writes the cache file, then broadcasts a status (and the error text when it failed, so
// every rank raises the same error and none hangs); the other ranks read the file rank 0 names (shared
// file system) and tokenize themselves only if that read misses. Packing runs on every rank.
// cache_dir "none": every rank tokenizes itself, as without the cache.
SftDataset load_dataset(const SftDataOptions& o, const Tokenizer* tokenizer, const std::string& cache_dir,
                        MpiEnvironment& mpi, MetricsLogger& logger) {
  if (cache_dir == "none") return SftDataset::build(o, tokenizer);
  enum : int { kOk = 0, kUserError = 1, kOtherError = 2 };
  int status = kOk;
  std::string error, path;
  uint64_t key = 0;
  std::optional<SftTokenizedExamples> tokenized;
  if (mpi.world_rank() == 0) {
    try {
      key = dataset_cache_key(o, tokenizer != nullptr);
      const std::string candidate = dataset_cache_path(cache_dir, key);
      std::string warning;
      tokenized = read_dataset_cache(candidate, key, &warning);
      if (!warning.empty()) logger.message(warning);
      if (tokenized) {
        path = candidate;
        logger.message("dataset cache hit: " + candidate);
      } else {
        tokenized = SftDataset::tokenize(o, tokenizer);
        std::string write_error;
        if (write_dataset_cache(candidate, key, *tokenized, &write_error)) {
          path = candidate;
          logger.message("dataset cache written: " + candidate);
        } else {
          logger.message("dataset cache not written (" + write_error + "); every rank tokenizes");
        }
      }
    } catch (const UserError& e) {
      status = kUserError;
      error = e.what();
    } catch (const std::exception& e) {
      status = kOtherError;
      error = e.what();
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (status != kOk) {
    broadcast_string(error);
    if (status == kUserError) throw UserError(error);
    throw std::runtime_error(error);
  }
  broadcast_string(path);
  MPI_Bcast(&key, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (mpi.world_rank() != 0) {
    if (!path.empty()) {
      std::string warning;
      tokenized = read_dataset_cache(path, key, &warning);
      if (!tokenized)
        std::cerr << "rank " << mpi.world_rank() << ": "
                  << (warning.empty() ? "dataset cache " + path + " not readable; tokenizing" : warning) << "\n";
    }
    if (!tokenized) tokenized = SftDataset::tokenize(o, tokenizer);
  }
  return SftDataset::from_examples(o, std::move(*tokenized), tokenizer);
}

}  // namespace

int run_sft_job(const SftConfig& c, MpiEnvironment& mpi) {
  // Validate everything that depends only on the configuration before any collective.
  if (c.output_dir.empty()) throw UserError("--output_dir must not be empty");
  if (c.per_device_train_batch_size < 1) throw UserError("--per_device_train_batch_size must be >= 1");
  if (c.gradient_accumulation_steps < 1) throw UserError("--gradient_accumulation_steps must be >= 1");
  if (c.max_length < 2) throw UserError("--max_length must be >= 2, got " + std::to_string(c.max_length));
  if (c.dataset_name.empty()) throw UserError("no dataset: pass --dataset_name PATH (.jsonl/.json file or directory)");
  if (c.save_steps > 0 || !c.resume_from_checkpoint.empty())
    throw UserError("--save_steps / --resume_from_checkpoint: HDF5 checkpoints are not implemented in this version; "
                    "the final model is saved to --output_dir");
  if (c.bf16) throw UserError("--bf16 needs the CUDA backend, which this version does not have; train in fp32 on cpu");
  const LrSchedule schedule = parse_lr_schedule(c.lr_scheduler_type);
  const ParallelDims requested_dims = ParallelDims{static_cast<int>(c.dp_replicate_size), static_cast<int>(c.dp_shard_size),
                                         static_cast<int>(c.cp_size), static_cast<int>(c.sp_size),
                                         static_cast<int>(c.tp_size), c.tp_sequence_parallel}
                                .resolved(mpi.world_size());
  DataParallelOptions dp_options;
  dp_options.sharding = parse_sharding(c.sharding);
  dp_options.bucket_elements = c.bucket_size_mb * 1024 * 1024 / 4;
  const ModelConfig model = load_model_config(c);
  const ParallelDims dims = requested_dims.for_model(static_cast<int>(model.num_attention_heads),
                                                     static_cast<int>(model.num_key_value_heads));
  validate_tensor_parallel(model, dims.tp);  // vocab_size and intermediate_size split by tp too
  dims.validate_sequence(c.max_length, c.pad_to_multiple_of);

  const Topology topology = Topology::discover(mpi, parse_device_request(c.device));
  if (topology.device() != Device::CPU)
    throw UserError("--device " + c.device + " selected a GPU, but this version trains on the cpu backend only: pass --device cpu");
  omp_set_num_threads(topology.cpu_threads());
  openblas_set_num_threads(topology.cpu_threads());
  const bool is_main = mpi.world_rank() == 0;
  MetricsLogger logger(c.output_dir, is_main, /*may_redraw=*/mpi.world_size() == 1);

  // Data: rank 0 tokenizes (or loads the cache), the others read its cache file; every rank packs the
  // same examples the same way (identical rows).
  const std::string tokenizer_dir = !c.tokenizer.empty() ? c.tokenizer : c.model_name_or_path;
  std::optional<Tokenizer> tokenizer;
  if (has_tokenizer_files(tokenizer_dir)) tokenizer = Tokenizer::from_directory(tokenizer_dir);
  const std::string cache_dir = !c.dataset_cache_dir.empty()
                                    ? c.dataset_cache_dir
                                    : (std::filesystem::path(c.output_dir) / ".dataset_cache").string();
  const SftDataset train =
      load_dataset(data_options(c, c.dataset_name, tokenizer_dir), tokenizer ? &*tokenizer : nullptr, cache_dir, mpi, logger);
  std::optional<SftDataset> eval;
  if (!c.eval_dataset.empty())
    eval = load_dataset(data_options(c, c.eval_dataset, tokenizer_dir), tokenizer ? &*tokenizer : nullptr, cache_dir, mpi, logger);
  const SftDataStats& st = train.stats();
  logger.message("dataset " + c.dataset_name + ": " + st.form + ", " + std::to_string(st.examples) + " examples, " +
                 std::to_string(st.tokens) + " tokens, " + std::to_string(st.packed_rows) + " rows" +
                 (st.rows_skipped ? ", " + std::to_string(st.rows_skipped) + " bad rows skipped" : "") +
                 (st.truncated ? ", " + std::to_string(st.truncated) + " truncated to max_length" : ""));

  ProcessGroups groups(Mesh(dims), mpi.world());
  DistributedSampler sampler(SamplerConfig{train.num_rows(), c.per_device_train_batch_size, dims.dp(),
                                           c.gradient_accumulation_steps, c.seed, c.shuffle_dataset, true});
  if (sampler.steps_per_epoch() == 0)
    throw UserError("the dataset has " + std::to_string(train.num_rows()) + " rows, fewer than one global batch of " +
                    std::to_string(sampler.global_batch_size()) +
                    " (per_device_train_batch_size x dp x gradient_accumulation_steps): use a smaller batch or more data");
  const int64_t total_steps = c.max_steps > 0 ? c.max_steps
                                              : static_cast<int64_t>(std::ceil(c.num_train_epochs * static_cast<double>(sampler.steps_per_epoch())));
  const LrScheduler scheduler(schedule, c.learning_rate, warmup_steps_for(c.warmup_steps, c.warmup_ratio, total_steps), total_steps);

  TrainerOptions options;
  options.parallel.data_parallel = dp_options;
  options.adamw = {static_cast<float>(c.adam_beta1), static_cast<float>(c.adam_beta2), static_cast<float>(c.adam_epsilon),
                   static_cast<float>(c.weight_decay)};
  options.max_grad_norm = c.max_grad_norm;
  options.parallel.gradient_checkpointing = c.gradient_checkpointing;
  options.parallel.loss_chunk_tokens = c.loss_chunk_tokens;
  auto ops = make_cpu_ops();
  Trainer trainer(model, *ops, groups, options);
  ParallelModel& laid_out = trainer.model();
  auto rank_tokens = [&](const Batch& batch) { return laid_out.shard_tokens(batch); };
  if (!c.model_name_or_path.empty()) {
    HfModelDir dir(c.model_name_or_path);
    laid_out.load_weights(weights_from_hf_dir(dir, laid_out.tp_layout()));
  } else {
    laid_out.load_weights(weights_from_init(model, c.seed, laid_out.tp_layout()));
  }
  const MemoryAccount memory = trainer.memory();
  logger.message("model " + std::string(model.architecture_name()) + " " + std::to_string(model.parameter_count()) +
                 " parameters; mesh " + dims.to_string() + "; sharding " + sharding_name(dp_options.sharding) +
                 "; per rank: parameters " + mib(memory.parameter_bytes) + ", gradients " + mib(memory.gradient_bytes) +
                 ", optimizer " + mib(memory.optimizer_bytes) + "; " + std::to_string(topology.cpu_threads()) +
                 " threads/rank; " + std::to_string(total_steps) + " steps");
  if (const std::string warning = cpu_blas_warning(); !warning.empty()) logger.message("warning: " + warning);

  double peak = c.peak_flops > 0 ? c.peak_flops : measure_gemm_flops(*ops);
  groups.world().comm().all_reduce(std::span<double>(&peak, 1), ReduceOp::Min);  // every rank uses the same peak

  StepMetrics m;
  m.total_steps = total_steps;
  double window_loss = 0, window_seconds = 0;
  int64_t window_steps = 0, window_tokens = 0;
  double window_flops = 0;
  const auto run_start = Clock::now();
  for (int64_t step = 0; step < total_steps; ++step) {
    const SamplerPosition pos = sampler.position(step);
    const auto t0 = Clock::now();
    std::vector<Batch> micro;
    int64_t seq = 0;  // the whole row's length (attention FLOPs), before sequence sharding
    for (int64_t a = 0; a < c.gradient_accumulation_steps; ++a) {
      const Batch batch = train.collate(sampler.micro_batch(pos.epoch, pos.step, a, groups.dp().rank()));
      seq = std::max(seq, batch.seq_len);
      micro.push_back(rank_tokens(batch));
    }
    const double lr = scheduler.lr(step);
    const StepResult r = trainer.step(micro, lr);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    window_loss += r.loss;
    window_seconds += seconds;
    window_tokens += r.tokens;
    window_flops += training_flops_per_token(model, seq) * static_cast<double>(r.tokens);
    ++window_steps;
    m.num_tokens += r.tokens;
    const bool last = step + 1 == total_steps;
    if ((c.logging_steps > 0 && (step + 1) % c.logging_steps == 0) || last) {
      m.step = step + 1;
      m.loss = window_loss / static_cast<double>(window_steps);
      m.grad_norm = r.grad_norm;
      m.learning_rate = scheduler.lr(step + 1);  // what transformers logs: the lr after the scheduler step
      m.epoch = static_cast<double>(step + 1) / static_cast<double>(sampler.steps_per_epoch());
      m.tokens_per_second = static_cast<double>(window_tokens) / window_seconds;
      m.mfu = window_flops / window_seconds / (peak * mpi.world_size());
      const double elapsed = std::chrono::duration<double>(Clock::now() - run_start).count();
      m.seconds_left = elapsed / static_cast<double>(step + 1) * static_cast<double>(total_steps - step - 1);
      logger.log_step(m);
      window_loss = window_seconds = window_flops = 0;
      window_steps = window_tokens = 0;
    }
    if (eval && ((c.eval_steps > 0 && (step + 1) % c.eval_steps == 0) || last)) {
      // Every eval row, dealt round-robin over the dp ranks in micro-batches of the training size.
      const int64_t dp = groups.dp().size(), rank = groups.dp().rank(), rows = eval->num_rows();
      std::vector<Batch> batches;
      std::vector<int64_t> mine;
      for (int64_t i = rank; i < rows; i += dp) mine.push_back(i);
      for (size_t i = 0; i < mine.size(); i += static_cast<size_t>(c.per_device_train_batch_size)) {
        const size_t end = std::min(mine.size(), i + static_cast<size_t>(c.per_device_train_batch_size));
        batches.push_back(rank_tokens(eval->collate(std::span<const int64_t>(mine.data() + i, end - i))));
      }
      // Every rank runs the same number of forwards (sharded strategies gather inside them): pad with
      // batches of one all-padding row, which carry no target.
      int64_t count = static_cast<int64_t>(batches.size());
      groups.dp().comm().all_reduce(std::span<int64_t>(&count, 1), ReduceOp::Max);
      while (static_cast<int64_t>(batches.size()) < count) batches.push_back(rank_tokens(padding_batch(2)));
      logger.log_eval(step + 1, trainer.evaluate(batches), static_cast<double>(step + 1) / static_cast<double>(sampler.steps_per_epoch()));
    }
  }
  logger.finish();
  export_hf_model(laid_out, c.output_dir, tokenizer_dir, is_main);
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  int64_t peak_rss = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
  groups.world().comm().all_reduce(std::span<int64_t>(&peak_rss, 1), ReduceOp::Max);
  logger.message("saved the model to " + c.output_dir + "; peak resident memory per rank " + mib(peak_rss) +
                 " (largest rank)");
  return 0;
}

}  // namespace trlhpc
