#include "trlhpc/train/checkpoint/async_save.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>

#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/runtime/thread_support.hpp"

namespace trlhpc::checkpoint {

struct AsyncCheckpointSaver::Job {
  SaveRequest request;
  StateLayout layout;
  std::vector<HostValues> sources;  // (num_sources) host copies; empty where this rank writes nothing
  int64_t optimizer_step = 0;
  std::shared_ptr<PhaseLabel> phase = std::make_shared<PhaseLabel>();

  std::mutex mutex;  // guards what follows
  bool finished = false;
  bool reported = false;  // take_committed returned the folder
  std::string committed;
  std::exception_ptr error;
  double write_seconds = 0;
};

AsyncCheckpointSaver::AsyncCheckpointSaver(ProcessGroups& groups, double timeout_seconds) {
  if (const MpiThreadSupport threads = mpi_thread_support(); !threads.multiple)
    throw UserError("--async_save writes checkpoints from a second thread and needs an MPI library with "
                    "MPI_THREAD_MULTIPLE; this one provides " + threads.level +
                    ". Drop --async_save (saves then pause training)");
  ProcessGroup& world = groups.world();
  auto phase = std::make_shared<PhaseLabel>();
  phase->set("asynchronous checkpoint save");
  MpiCommunicatorOptions options;
  options.timeout_seconds = timeout_seconds;
  group_ = std::make_shared<ProcessGroup>(GroupKind::World, MpiComm::duplicate(world.mpi_comm()), world.members(),
                                          options, phase);
}

AsyncCheckpointSaver::~AsyncCheckpointSaver() {
  if (!thread_.joinable()) return;
  thread_.join();
  std::lock_guard<std::mutex> lock(job_->mutex);
  if (job_->error) {
    try {
      std::rethrow_exception(job_->error);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "trlhpc: %sthe asynchronous checkpoint save did not complete: %s\n", rank_prefix().c_str(),
                   e.what());
    }
  }
}

void AsyncCheckpointSaver::start(const SaveRequest& request, Trainer& trainer) {
  wait();
  auto job = std::make_shared<Job>();
  job->request = request;
  job->layout = state_layout(trainer.model(), trainer.optimizer(), request.model_only);
  job->sources.reserve(static_cast<size_t>(job->layout.num_sources));
  for (int s = 0; s < job->layout.num_sources; ++s)
    job->sources.push_back(copy_source(trainer.model(), trainer.optimizer(), job->layout, s));
  job->optimizer_step = trainer.optimizer().step_count();
  job->phase->set("asynchronous checkpoint save of step " + std::to_string(request.progress.step));
  job_ = job;
  // The thread owns what it uses (job, group), so it never reads this object.
  thread_ = std::thread([job, group = group_] {
    const auto t0 = std::chrono::steady_clock::now();
    std::string committed;
    std::exception_ptr error;
    try {
      const StateSource source = [&](int s) { return job->sources[static_cast<size_t>(s)].span(); };
      committed = write_checkpoint(job->request, *group, job->layout, source, job->optimizer_step);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(job->mutex);
    job->sources.clear();
    job->sources.shrink_to_fit();  // give the host copy back as soon as it is on disk
    job->committed = committed;
    job->error = error;
    job->write_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    job->finished = true;
  });
}

std::string AsyncCheckpointSaver::wait() {
  if (!thread_.joinable()) return "";
  thread_.join();
  std::lock_guard<std::mutex> lock(job_->mutex);
  job_->reported = true;
  if (job_->error) std::rethrow_exception(job_->error);  // write_checkpoint agreed on it: every rank throws
  return job_->committed;
}

std::string AsyncCheckpointSaver::take_committed() {
  if (!job_) return "";
  std::lock_guard<std::mutex> lock(job_->mutex);
  if (!job_->finished || job_->reported || job_->error) return "";
  job_->reported = true;
  return job_->committed;
}

double AsyncCheckpointSaver::last_write_seconds() const {
  if (!job_) return 0;
  std::lock_guard<std::mutex> lock(job_->mutex);
  return job_->write_seconds;
}

}  // namespace trlhpc::checkpoint
