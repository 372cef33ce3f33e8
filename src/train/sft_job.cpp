#include "trlhpc/train/sft_job.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "src/train/sft_loop.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/dataset/fingerprint.hpp"
#include "trlhpc/data/dataset/special_tokens.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/model/peft_adapter.hpp"
#include "trlhpc/ops/backend.hpp"
#include "trlhpc/comm/backend_communicators.hpp"
#include "trlhpc/comm/deadline_timer.hpp"
#include "trlhpc/parallel/memory_plan.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/comm/progress_thread.hpp"
#include "trlhpc/runtime/cpu_blas.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/runtime/topology.hpp"
#include "trlhpc/train/checkpoint/async_save.hpp"
#include "trlhpc/train/checkpoint/checkpoint.hpp"
#include "trlhpc/train/checkpoint/commit.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"
#include "trlhpc/train/metrics_logger.hpp"
#include "trlhpc/train/metrics_plot.hpp"
#include "trlhpc/train/mfu_peaks.hpp"
#include "trlhpc/train/model_export.hpp"
#include "trlhpc/train/output_dir.hpp"
#include "trlhpc/train/output_dir_lock.hpp"
#include "trlhpc/comm/root_action.hpp"
#include "trlhpc/train/sft_data.hpp"
#include "trlhpc/train/sft_plan.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc {
namespace {

// --save_dtype: auto keeps a bfloat16 input model bfloat16 (as save_pretrained of a model loaded in its
// config's dtype does) and saves everything else, float16 included, as float32.
DType final_save_dtype(const SftConfig& c, const ModelConfig& model) {
  if (c.save_dtype == "auto") return model.torch_dtype == "bfloat16" ? DType::BF16 : DType::F32;
  return c.save_dtype == "bfloat16" ? DType::BF16 : DType::F32;
}

std::string mib(int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buffer;
}

void log_dataset(const SftConfig& c, const dataset::SftDataset& train, MetricsLogger& logger) {
  const dataset::SftDataStats& st = train.stats();
  const std::string name = c.datasets.empty() ? c.dataset_name : "mixture (" + c.datasets_config_file + " datasets:)";
  logger.message("dataset " + name + ": " + st.form + ", " + std::to_string(st.examples) + " examples, " +
                 std::to_string(st.tokens) + " tokens, " + std::to_string(st.packed_rows) + " rows" +
                 (st.rows_skipped ? ", " + std::to_string(st.rows_skipped) + " bad rows skipped" : "") +
                 (st.truncated ? ", " + std::to_string(st.truncated) + " truncated to max_length" : "") +
                 (st.untrained_examples ? ", " + std::to_string(st.untrained_examples) +
                                              " examples with no trained token (all targets masked)"
                                        : ""));
  const dataset::EndOfTurnCount& eot = st.end_of_turn;
  if (eot.marked > 0)
    logger.message("--assistant_only_loss: the chat template has no {% generation %} markers, so each assistant "
                   "message's content is located in the rendered chat and trained together with the end-of-turn "
                   "token that follows it (" + std::to_string(eot.marked) + " assistant turns)");
  if (eot.missing > 0)
    logger.message("warning: --assistant_only_loss: " + std::to_string(eot.missing) +
                   " assistant turns have no special token after their content, so nothing teaches the model to end "
                   "its turn there; add {% generation %}...{% endgeneration %} around the assistant output including "
                   "its end-of-turn token (see --chat_template_path), or train without --assistant_only_loss");
}

// The pretrained weights of --model_name_or_path, or the seeded random init of --model_config.
// With LoRA: the base as above, then the adapters of --model_name_or_path's adapter directory, or
// PEFT's init from --seed.
void load_base_weights(const SftConfig& c, const SftPlan& plan, ParallelModel& model) {
  if (!plan.base_model_dir.empty()) {
    HfModelDir dir(plan.base_model_dir);
    model.load_weights(weights_from_hf_dir(dir, model.tp_layout()));
  } else {
    model.load_weights(weights_from_init(model.config(), c.seed, model.tp_layout()));
  }
}

void load_initial_weights(const SftConfig& c, const SftPlan& plan, ParallelModel& model) {
  load_base_weights(c, plan, model);
  if (!model.has_adapters()) return;
  if (plan.adapter_dir.empty()) {  // PEFT's init; modules_to_save copies start from the base
    std::optional<HfModelDir> dir;
    if (!plan.base_model_dir.empty()) dir.emplace(plan.base_model_dir);
    model.load_adapters(lora_weights_from_init(
        model.config(), model.lora_specs(), c.seed,
        dir ? base_tensors_from_hf_dir(*dir) : base_tensors_from_init(model.config(), c.seed), model.tp_layout()));
    return;
  }
  PeftAdapterDir adapter(plan.adapter_dir);
  adapter.check_weights(model.config(), model.lora_targets());
  model.load_adapters(lora_weights_from_file(adapter.weights(), model.lora_specs(), model.tp_layout()));
}

// The start line's LoRA part: what trains (PEFT's print_trainable_parameters).
std::string trainable_summary(const SftPlan& plan) {
  const std::optional<LoraConfig>& lora = plan.trainer.parallel.lora;
  if (!lora) return "";
  int64_t adapter = 0;
  for (const ParameterSpec& spec : lora_parameter_specs(plan.model, *lora, resolve_lora_targets(plan.model, *lora)))
    adapter += spec.numel();
  const int64_t all = plan.model.parameter_count() + adapter;
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.4f", 100.0 * static_cast<double>(adapter) / static_cast<double>(all));
  std::string modules;
  for (const std::string& m : lora->target_modules) modules += (modules.empty() ? "" : ",") + m;
  std::string saved;
  for (const std::string& m : lora->modules_to_save) saved += (saved.empty() ? "" : ",") + m;
  if (!saved.empty()) modules += " + " + saved + " in full";
  return "; LoRA r " + std::to_string(lora->r) + " on " + modules + ": trainable " + std::to_string(adapter) +
         " of " + std::to_string(all) + " parameters (" + pct + " %), base frozen";
}

// What a checkpoint of this run must match to be resumed: the plan's model and tokenizer, the seed (the
// data order and the packing shuffle) and data_seed when set (then the data order), the training rows by
// content and order (counts alone let the same rows in another order resume silently), the global batch
// (the sampler's rows of a step depend on it).
nlohmann::json run_identity(const SftConfig& c, const SftPlan& plan, const dataset::SftDataset& train,
                            const SftLoop& loop) {
  nlohmann::json identity = plan.identity;
  const dataset::SftDataStats& st = train.stats();
  identity["seed"] = c.seed;
  if (c.data_seed) identity["data_seed"] = *c.data_seed;  // only when set: default manifests stay as they were
  identity["dataset"] = {{"rows", train.num_rows()}, {"examples", st.examples}, {"tokens", st.tokens},
                         {"target_tokens", st.target_tokens}, {"content", dataset::dataset_fingerprint(train)}};
  identity["global_batch_size"] = loop.global_batch_size();
  identity["rows_per_epoch"] = loop.rows_per_epoch();  // --dataloader_drop_last may drop some
  return identity;
}

// The options a checkpoint records about the run (not checked on resume).
nlohmann::json run_record(const SftConfig& c, const SftPlan& plan, int64_t total_steps) {
  const ParallelDims& d = plan.dims;
  nlohmann::json record = {
      {"mesh", {{"dp_replicate", d.dp_replicate}, {"dp_shard", d.dp_shard}, {"cp", d.cp}, {"sp", d.sp}, {"tp", d.tp},
                {"tp_sequence_parallel", d.tp_sequence_parallel}}},
      {"sharding", sharding_name(plan.trainer.parallel.data_parallel.sharding)},
      {"seed", c.seed}, {"learning_rate", c.learning_rate}, {"lr_scheduler_type", c.lr_scheduler_type},
      {"warmup_steps", c.warmup_steps}, {"warmup_ratio", c.warmup_ratio}, {"total_steps", total_steps},
      {"max_length", c.max_length}, {"packing", c.packing}, {"dataset_name", c.dataset_name},
      {"per_device_train_batch_size", c.per_device_train_batch_size},
      {"gradient_accumulation_steps", c.gradient_accumulation_steps},
      {"dataloader_drop_last", c.dataloader_drop_last},
      // The tensors are fp32 masters and moments either way: a resume may switch precision.
      {"precision", c.bf16 ? "bf16" : "fp32"},
      // A LoRA checkpoint holds the adapters only: where their frozen base is (trlhpc export --merge).
      {"base_model", plan.base_model_name}};
  if (c.data_seed) record["data_seed"] = *c.data_seed;
  return record;
}

// --save_steps and --resume_from_checkpoint: the loop saves with this run's identity; a resumed run
// loads the checkpoint (on this layout, whatever layout wrote it) instead of the initial weights.
void set_up_checkpoints(const SftConfig& c, const SftPlan& plan, const dataset::SftDataset& train, Trainer& trainer,
                        SftLoop& loop, MetricsLogger& logger, checkpoint::AsyncCheckpointSaver* async) {
  const nlohmann::json identity = run_identity(c, plan, train, loop);
  loop.set_checkpoints({c.output_dir, {}, identity, run_record(c, plan, loop.total_steps()), plan.tokenizer_dir,
                        c.save_total_limit, /*keep_step=*/-1, /*best_model=*/nullptr, c.save_only_model},
                       c.save_steps, async);
  if (plan.resume_dir.empty()) {
    load_initial_weights(c, plan, trainer.model());
    return;
  }
  checkpoint::require_same_identity(plan.resume_dir, plan.resume_manifest.value("identity", nlohmann::json::object()),
                                    identity);
  // A LoRA checkpoint holds the adapters' state; the frozen base comes from the model, as at the start.
  if (trainer.model().has_adapters()) load_base_weights(c, plan, trainer.model());
  const checkpoint::TrainingProgress progress = checkpoint::load_checkpoint(plan.resume_dir, plan.resume_manifest, trainer);
  loop.resume_at(progress, plan.resume_manifest.value("best_model", nlohmann::json()));
  logger.forget_after(progress.step);
  logger.message("resumed from " + plan.resume_dir + " after step " + std::to_string(progress.step) + " of " +
                 std::to_string(loop.total_steps()));
}

// --load_best_model_at_end: the best checkpoint's weights become the model the job saves
// (Trainer._load_best_model; TRL's script then saves that model). Collective; the same on every rank.
void load_best_model(const SftLoop& loop, Trainer& trainer, const nlohmann::json& identity, MetricsLogger& logger) {
  const std::optional<BestModelTracker>& best = loop.best_model();
  if (!best || best->best_checkpoint().empty()) {
    logger.message("warning: --load_best_model_at_end: no checkpoint holds a best " +
                   (best ? best->metric() : std::string("metric")) + " (none was saved at an evaluation's step); "
                   "the final model is the last step's");
    return;
  }
  const std::string& dir = best->best_checkpoint();
  checkpoint::load_checkpoint_parameters(dir, checkpoint::open_manifest(dir, identity), trainer.model());
  char score[64];
  std::snprintf(score, sizeof score, "%.17g", best->best_metric().value_or(0.0));
  logger.message("loaded the best model from " + dir + " (" + best->metric() + " " + score + ")");
}

// The start line: the model, the layout, and per rank the persistent state the strategy allocated plus
// what a step of a full-length micro-batch adds (memory_plan.hpp), so a user sees the floor the peak
// resident memory should approach.
void log_start(const SftConfig& c, const SftPlan& plan, const Trainer& trainer, const Topology& topology, const Ops& ops,
               DeviceCommKind device_comm, const MfuPeaks& peaks, int64_t process_bytes, int64_t total_steps,
               MetricsLogger& logger) {
  const MemoryAccount memory = trainer.memory();
  const ShardingKind sharding = plan.trainer.parallel.data_parallel.sharding;
  MicroBatchShape shape{c.per_device_train_batch_size, c.max_length, c.gradient_checkpointing, c.loss_chunk_tokens,
                        c.bf16 ? DType::BF16 : DType::F32, plan.trainer.parallel.lora.has_value()};
  shape.cpu_kernels = ops.device() == Device::CPU;
  if (const std::optional<LoraConfig>& lora = plan.trainer.parallel.lora) {  // tp rank 0 holds the replicated factors
    std::vector<int64_t> unit_elements(static_cast<size_t>(lora_unit_layout(plan.model, *lora).count), 0);
    for (const ParameterSpec& spec :
         lora_parameter_specs(plan.model, *lora, resolve_lora_targets(plan.model, *lora), TpLayout{plan.dims.tp, 0}))
      unit_elements[static_cast<size_t>(spec.unit)] += spec.numel();
    shape.adapter_unit_elements = *std::max_element(unit_elements.begin(), unit_elements.end());
  }
  const Offload offload = plan.trainer.parallel.data_parallel.offload;
  const StepMemoryPlan step = plan_step_memory(plan.model, plan.dims, sharding, shape, offload);
  // CPU offload: what went to pinned host memory, and the device bytes it would take otherwise.
  const std::string host = offload == Offload::None
                               ? std::string()
                               : "; offload " + std::string(offload_name(offload)) + ": pinned host " +
                                     mib(memory.host_bytes) + ", device saving " + mib(memory.device_bytes_saved);
  const int64_t floor = memory.parameter_bytes + memory.gradient_bytes + memory.optimizer_bytes +
                        step.gathered_unit_bytes + step.activation_bytes + step.loss_bytes + step.attention_bytes;
  // On the CPU the process (libraries, MPI, tokenizer, dataset) shares the memory the peak is read from.
  const std::string predicted = shape.cpu_kernels ? ", process " + mib(process_bytes) + ", predicted peak " +
                                                        mib(floor + process_bytes)
                                                  : std::string();
  logger.message("model " + std::string(plan.model.architecture_name()) + " " +
                 std::to_string(plan.model.parameter_count()) + " parameters; mesh " + plan.dims.to_string() +
                 trainable_summary(plan) + "; sharding " + sharding_name(sharding) +
                 "; per rank: parameters " + mib(memory.parameter_bytes) +
                 ", gradients " + mib(memory.gradient_bytes) + ", optimizer " + mib(memory.optimizer_bytes) +
                 ", largest gathered unit + gradient " + mib(step.gathered_unit_bytes) + ", activations " +
                 mib(step.activation_bytes) + ", loss chunk " + mib(step.loss_bytes) + ", attention " +
                 mib(step.attention_bytes) + ", floor " + mib(floor) + predicted + host + "; " +
                 "backend " + backend_description(ops, topology) + ", device collectives " +
                 device_comm_kind_name(device_comm) + "; " + peaks.describe() + "; " + std::to_string(total_steps) +
                 " steps");
  if (const std::string warning = cpu_blas_warning(); !warning.empty()) logger.message("warning: " + warning);
}

void log_saved(const SftConfig& c, ProcessGroups& groups, MetricsLogger& logger) {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  int64_t peak_rss = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
  groups.world().host().all_reduce(std::span<int64_t>(&peak_rss, 1), ReduceOp::Max);
  logger.message("saved the model to " + c.output_dir + "; peak resident memory per rank " + mib(peak_rss) +
                 " (largest rank)");
}

// --plot: the run has succeeded and its model is saved, so a plot that cannot be drawn (no gnuplot) is
// a warning, not a failed job.
void plot_at_end(const SftConfig& c, MetricsLogger& logger) {
  const std::string metrics = (std::filesystem::path(c.output_dir) / "metrics.jsonl").string();
  const std::string png = (std::filesystem::path(c.output_dir) / "loss.png").string();
  try {
    plot_metrics(metrics, png, PlotOptions{});
    logger.message("plotted " + metrics + " to " + png);
  } catch (const UserError& e) {
    logger.message(std::string("warning: --plot: ") + e.what());
  }
}

// Exit code 3 and how to go on (CONTRACT.md), after a preemption signal.
int report_preemption(const SftConfig& c, int signal, const SftLoopOutcome& outcome, int64_t total_steps,
                      MetricsLogger& logger) {
  logger.finish();
  if (outcome.checkpoint.empty())
    logger.message(std::string("stopped by ") + signal_name(signal) + " after step " + std::to_string(outcome.steps_done) +
                   ": no step to save; run the same command again");
  else
    logger.message(std::string("stopped by ") + signal_name(signal) + " after step " + std::to_string(outcome.steps_done) +
                   " of " + std::to_string(total_steps) + ": checkpoint " + outcome.checkpoint +
                   "; resume with --resume_from_checkpoint latest --output_dir " + c.output_dir);
  return 3;
}

int run_watched_sft_job(const SftConfig& c, MpiEnvironment& mpi) {
  const PreemptionWatch watch;  // SIGTERM / SIGUSR1 set a flag from here on
  const SftPlan plan = plan_sft_job(c, mpi.world_size());  // every check that needs no other rank
  // The start-up exchanges made before the communicators (and their watchdogs) exist, topology
  // discovery and the communicator splits and duplicates, are blocking MPI collectives: a rank that
  // never arrives (a wedged node) is caught by this deadline instead (exit 2, naming the exchange).
  DeadlineTimer startup(c.ddp_timeout);
  startup.arm("start-up exchange (topology discovery and creating the communicators)");
  const Topology topology = Topology::discover(mpi, parse_device_request(c.device));
  // The backend before the communicators: a device communicator orders its stream after the backend's.
  BackendOptions backend;
  backend.compute_dtype = c.bf16 ? DType::BF16 : DType::F32;
  backend.cpu_gemm = c.cpu_gemm, backend.cpu_bf16_gemm = c.cpu_bf16_gemm, backend.cuda_attention = c.cuda_attention;
  const std::unique_ptr<Ops> ops = make_ops(topology, backend);
  const bool is_main = mpi.world_rank() == 0;
  // --ddp_timeout: a collective that waits longer ends the job (exit 2), naming the phase set below.
  // --comm_progress thread: one progress thread shared by every group's communicator.
  std::string progress_fallback;
  MpiCommunicatorOptions comm_options;
  comm_options.timeout_seconds = c.ddp_timeout;
  comm_options.progress = make_progress_thread(parse_comm_progress(c.comm_progress), &progress_fallback);
  const BackendCommunicators device_comms = backend_communicators(topology, *ops, mpi.world());
  ProcessGroups groups(Mesh(plan.dims), mpi.world(), comm_options, device_comms.factory);
  startup.disarm();  // from here on every exchange goes through the groups' communicators (watchdog)
  groups.set_phase("taking the output directory");
  // Before anything is written under --output_dir: global rank 0 locks it (one run per folder), then a
  // fresh run checks that it holds no earlier run, or removes that run's files with
  // --overwrite_output_dir (output_dir.hpp). Rank 0's verdict is every rank's.
  // The metrics files (metrics.jsonl, TensorBoard's --logging_dir) are opened there too, so a folder
  // rank 0 cannot write is every rank's error, not rank 0's alone while the others wait for it.
  // Redrawing in place (\r\033[K) only on a user's terminal: not under a launcher, whose pseudo-terminal
  // may well end in a redirected log (mpirun -np 1 ... > log).
  const bool may_redraw = mpi.world_size() == 1 && !mpi.under_launcher();
  std::optional<OutputDirLock> lock;
  std::vector<std::string> output_dir_log;
  std::optional<MetricsLogger> metrics;
  run_on_root(groups.world().host(), [&] {
    lock.emplace(c.output_dir);
    if (plan.resume_dir.empty()) output_dir_log = prepare_fresh_output_dir(c.output_dir, c.overwrite_output_dir);
    metrics.emplace(c.output_dir, is_main, may_redraw, plan.tensorboard_dir);
  });
  if (!metrics) metrics.emplace(c.output_dir, is_main, may_redraw, plan.tensorboard_dir);
  MetricsLogger& logger = *metrics;
  groups.set_phase("dataset preparation");
  if (!progress_fallback.empty()) logger.message("warning: " + progress_fallback);
  if (lock && !lock->replaced_stale().empty())
    logger.message("replaced the stale lock of a run that is gone (" + lock->replaced_stale() + ") in " + c.output_dir);
  for (const std::string& line : output_dir_log) logger.message(line);

  // Data: rank 0 tokenizes (or reads the cache), the others read its cache file; every rank packs
  // the same examples the same way (identical rows).
  // Every rank resolves both datasets' files first (file system only, so alike everywhere): a missing
  // eval split is reported in seconds, not after the train set has been tokenized.
  (void)dataset::resolve_source(dataset_source(c, DatasetRole::kTrain));
  if (evaluates(c)) (void)dataset::resolve_source(dataset_source(c, DatasetRole::kEval));
  std::optional<tokenizer::Tokenizer> tokenizer = load_tokenizer(plan.tokenizer_dir);
  if (tokenizer) {
    dataset::apply_special_token_options(*tokenizer, plan.tokenizer_dir, c.eos_token, c.pad_token);
  } else if (!c.eos_token.empty() || !c.pad_token.empty()) {
    throw UserError(std::string(c.eos_token.empty() ? "--pad_token" : "--eos_token") +
                    " replaces a token of the tokenizer, but there is none (pre-tokenized rows): pass --tokenizer DIR, "
                    "or leave it unset");
  }
  const tokenizer::Tokenizer* tok = tokenizer ? &*tokenizer : nullptr;
  if (tok) require_tokenizer_fits_model(*tok, plan.tokenizer_dir, plan.model.vocab_size);
  // A preemption signal stops the tokenizing (on the rank that got it); the ranks then agree on it.
  const auto interrupted = [&watch] { return watch.local_signal() != 0; };
  const std::optional<dataset::SftDataset> loaded =
      load_sft_dataset(c, plan, DatasetRole::kTrain, tok, groups.world().host(), logger, interrupted);
  std::optional<dataset::SftDataset> eval;
  if (evaluates(c)) eval = load_sft_dataset(c, plan, DatasetRole::kEval, tok, groups.world().host(), logger, interrupted);
  if (const int signal = watch.agreed_signal(groups.world().host()))
    return report_preemption(c, signal, SftLoopOutcome{signal, 0, ""}, 0, logger);
  TRLHPC_ASSERT(loaded && (!evaluates(c) || eval), "a dataset load stopped without a signal");
  const dataset::SftDataset& train = *loaded;
  if (!c.datasets.empty() && !c.dataset_name.empty())
    logger.message("warning: both a datasets: mixture (" + c.datasets_config_file + ") and --dataset_name " + c.dataset_name +
                   " are given; the mixture is used and --dataset_name ignored, as TRL does");
  log_dataset(c, train, logger);

  const int64_t process_bytes = process_resident_bytes();  // before the model: the memory plan's process term
  Trainer trainer(plan.model, *ops, groups, plan.trainer);
  std::optional<checkpoint::AsyncCheckpointSaver> async;  // --async_save: outlives the loop's saves
  if (c.async_save) {
    startup.arm("creating the communicator of --async_save");
    async.emplace(groups, c.ddp_timeout);
    startup.disarm();
  }
  SftLoop loop(c, plan.schedule, trainer, train, eval ? &*eval : nullptr, logger, watch);
  set_up_checkpoints(c, plan, train, trainer, loop, logger, async ? &*async : nullptr);
  groups.set_phase("measuring the GEMM rate for MFU");
  const MfuPeaks peaks = mfu_peaks(c, plan.model, *ops, topology, groups);
  log_start(c, plan, trainer, topology, *ops, device_comms.kind, peaks, process_bytes, loop.total_steps(), logger);
  const SftLoopOutcome outcome = loop.run(peaks);
  if (outcome.signal) return report_preemption(c, outcome.signal, outcome, loop.total_steps(), logger);
  logger.finish();
  if (c.load_best_model_at_end) load_best_model(loop, trainer, run_identity(c, plan, train, loop), logger);

  if (trainer.model().has_adapters())  // TRL saves a PEFT run's adapter (PeftModel.save_pretrained)
    export_peft_adapter(trainer.model(), c.output_dir, plan.tokenizer_dir, is_main, plan.base_model_name);
  else
    export_hf_model(trainer.model(), c.output_dir, plan.tokenizer_dir, is_main, final_save_dtype(c, plan.model));
  log_saved(c, groups, logger);  // collective: every rank is done with the checkpoints past this line
  // transformers' end of training under --save_total_limit 1: only the best checkpoint stays.
  const std::optional<BestModelTracker>& best = loop.best_model();
  if (is_main && c.save_total_limit == 1 && best && best->best_checkpoint_step() >= 0)
    for (const std::string& dir : checkpoint::keep_only_checkpoint(c.output_dir, best->best_checkpoint_step()))
      logger.message("deleted " + dir + " at the end (--save_total_limit 1 keeps only the best checkpoint)");
  if (c.plot && is_main) plot_at_end(c, logger);
  return 0;
}

}  // namespace

int run_sft_job(const SftConfig& c, MpiEnvironment& mpi) {
  const int code = run_watched_sft_job(c, mpi);
  ignore_preemption_signals_from_now();  // the job is over: a late signal must not kill a finishing rank
  return code;
}

}  // namespace trlhpc
