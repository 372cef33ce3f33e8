#include "trlhpc/cli/env_command.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include "trlhpc/cli/accelerate_config.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/model/model_config.hpp"
#include "trlhpc/ops/backend.hpp"
#include "trlhpc/ops/nominal_peak.hpp"
#include "trlhpc/parallel/memory_plan.hpp"

#include <array>
#include <boost/program_options.hpp>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/runtime/library_versions.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/runtime/topology.hpp"

#ifdef TRLHPC_HAVE_CUDA
#include "device_query.cuh"
#endif

namespace trlhpc {

namespace {

namespace po = boost::program_options;
using json = nlohmann::ordered_json;  // keeps the order things are added in

// `trlhpc sft`'s defaults, so `trlhpc env --model M` plans the step sft would run.
MicroBatchShape default_micro_batch() {
  const SftConfig c;
  return MicroBatchShape{c.per_device_train_batch_size, c.max_length, c.gradient_checkpointing, c.loss_chunk_tokens};
}

struct EnvOptions {
  ParallelDims dims;
  std::string accelerate_config;  // profile or file; flags given explicitly win over it
  std::string model;              // config.json or HF directory, for the memory plan
  std::string sharding = "none";
  MicroBatchShape batch = default_micro_batch();  // for the step part of the memory plan
  std::set<std::string> explicit_flags;
  std::string device = "auto";
  BackendOptions kernels;  // --cpu_gemm, --cpu_bf16_gemm, --cuda_attention: what a run with them would use
  bool json = false;
  bool help = false;
};

EnvOptions parse_env_options(int argc, char** argv, std::string& help_text) {
  EnvOptions o;
  po::options_description desc("trlhpc env [flags]: versions, hosts, ranks, devices, mesh and groups");
  desc.add_options()                                                                                //
      ("dp_replicate_size", po::value<int>(&o.dims.dp_replicate)->default_value(1), "replicas (HSDP)")
      ("dp_shard_size", po::value<int>(&o.dims.dp_shard)->default_value(-1), "FSDP shards; -1: the rest")
      ("cp_size", po::value<int>(&o.dims.cp)->default_value(1), "context parallel (ring attention)")
      ("sp_size", po::value<int>(&o.dims.sp)->default_value(1), "Ulysses sequence parallel")
      ("tp_size", po::value<int>(&o.dims.tp)->default_value(1), "tensor parallel")
      ("tp_sequence_parallel", po::bool_switch(&o.dims.tp_sequence_parallel), "sequence parallelism inside tp (shown in the mesh)")
      ("device", po::value<std::string>(&o.device)->default_value("auto"), "auto|cpu|cuda")
      ("accelerate_config", po::value<std::string>(&o.accelerate_config), "profile name or accelerate YAML file")
      ("sharding", po::value<std::string>(&o.sharding)->default_value("none"), "none|zero1|zero2|zero3 (for the memory plan)")
      ("model", po::value<std::string>(&o.model), "config.json or model directory: print per-rank memory")
      ("per_device_train_batch_size", po::value<int64_t>(&o.batch.rows)->default_value(o.batch.rows), "rows per micro-batch (memory plan)")
      ("max_length", po::value<int64_t>(&o.batch.seq_len)->default_value(o.batch.seq_len), "tokens per row (memory plan)")
      ("gradient_checkpointing", po::bool_switch(&o.batch.gradient_checkpointing), "recompute layers in backward (memory plan)")
      ("loss_chunk_tokens", po::value<int64_t>(&o.batch.loss_chunk_tokens)->default_value(o.batch.loss_chunk_tokens), "logit rows at once (memory plan)")
      ("cpu_gemm", po::value<std::string>(&o.kernels.cpu_gemm)->default_value("auto"), "auto|avx512|avx2|openblas (as trlhpc sft)")
      ("cpu_bf16_gemm", po::value<std::string>(&o.kernels.cpu_bf16_gemm)->default_value("auto"), "auto|amx|avx512bf16|f32 (as trlhpc sft)")
      ("cuda_attention", po::value<std::string>(&o.kernels.cuda_attention)->default_value("auto"), "auto|cudnn|kernel (as trlhpc sft)")
      ("json", po::bool_switch(&o.json), "print one JSON object")
      ("help,h", po::bool_switch(&o.help), "this help");
  std::ostringstream help;
  help << desc;
  help_text = help.str();
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    po::notify(vm);
    for (const auto& [name, value] : vm)
      if (!value.defaulted()) o.explicit_flags.insert(name);
  } catch (const po::error& e) {
    throw UserError(std::string("trlhpc env: ") + e.what() + "; see trlhpc env --help");
  }
  return o;
}

// What rank 0 needs from every rank beyond the topology table, gathered as fixed-size ints + text.
struct RankFacts {
  static constexpr int kInts = 2 + 2 * kNumGroupKinds;  // cpu_threads, gpu_index, group ranks, group sizes
  static constexpr int kText = 96;                      // device description
};

std::string describe_device(const Topology& topo) {
  if (topo.device() == Device::CPU) return "cpu";
  std::string text = "cuda:" + std::to_string(topo.gpu_index());
#ifdef TRLHPC_HAVE_CUDA
  text += " (" + cuda::device_name(topo.gpu_index()) + ")";
#endif
  return text;
}

std::string rank_list(const std::vector<int>& ranks) {  // [0,1,2,3] -> "0-3", [0,2] -> "0,2"
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(ranks[i]);
    if (j > i) {
      s += j == i + 1 ? "," : "-";
      s += std::to_string(ranks[j]);
    }
    i = j + 1;
  }
  return s;
}

json build_report(const EnvOptions& options, const Topology& topo, ProcessGroups& groups) {
  // Gather every rank's facts to rank 0 of the world group.
  const int world = topo.world_size();
  std::array<int32_t, RankFacts::kInts> mine{};
  mine[0] = topo.cpu_threads();
  mine[1] = topo.gpu_index();
  for (int k = 0; k < kNumGroupKinds; ++k) {
    mine[static_cast<size_t>(2 + k)] = groups.get(kAllGroupKinds[static_cast<size_t>(k)]).rank();
    mine[static_cast<size_t>(2 + kNumGroupKinds + k)] = groups.get(kAllGroupKinds[static_cast<size_t>(k)]).size();
  }
  std::array<uint8_t, RankFacts::kText> text{};  // NUL-terminated
  const std::string device = describe_device(topo);
  std::memcpy(text.data(), device.data(), std::min(device.size(), text.size() - 1));
  // An all-gather rather than a gather to rank 0: a few hundred bytes per rank, and the Communicator
  // stays the only way this command talks to other ranks.
  std::vector<int32_t> ints(static_cast<size_t>(world) * RankFacts::kInts);  // (world, kInts)
  std::vector<uint8_t> texts(static_cast<size_t>(world) * RankFacts::kText);  // (world, kText)
  Communicator& comm = groups.world().host();
  comm.all_gather(std::span<const int32_t>(mine), std::span<int32_t>(ints));
  comm.all_gather(std::span<const uint8_t>(text), std::span<uint8_t>(texts));
  if (topo.world_rank() != 0) return {};

  json report;
  for (const auto& lib : library_versions()) report["versions"][lib.name] = lib.version;
  report["world_size"] = world;
  report["num_nodes"] = topo.num_nodes();
  report["max_ranks_per_node"] = topo.max_ranks_per_node();
  report["device_request"] = options.device;
  report["device_binding"] = topo.binding().reason;
  report["nodes"] = json::array();
  for (int n = 0; n < topo.num_nodes(); ++n) {
    json node = {{"index", n}, {"host", topo.node_hosts()[static_cast<size_t>(n)]}, {"ranks", json::array()}};
    for (const auto& r : topo.ranks())
      if (r.node_index == n) node["ranks"].push_back(r.world_rank), node["gpus"] = r.visible_gpus, node["cpus"] = r.node_cpus;
    report["nodes"].push_back(node);
  }
  const Mesh& mesh = groups.mesh();
  json& m = report["mesh"];
  for (int a = 0; a < kNumMeshAxes; ++a) m[mesh_axis_name(static_cast<MeshAxis>(a))] = mesh.axis_size(static_cast<MeshAxis>(a));
  m["order"] = {"dp_replicate", "dp_shard", "cp", "sp", "tp"};
  m["tp_sequence_parallel"] = options.dims.tp_sequence_parallel && mesh.axis_size(MeshAxis::Tp) > 1;
  report["ranks"] = json::array();
  for (int r = 0; r < world; ++r) {
    const int32_t* facts = &ints[static_cast<size_t>(r) * RankFacts::kInts];
    const RankPlacement& place = topo.ranks()[static_cast<size_t>(r)];
    json rank = {{"rank", r},           {"host", place.host},          {"node", place.node_index},
                 {"local_rank", place.local_rank}, {"local_size", place.local_size},
                 {"device", std::string(reinterpret_cast<const char*>(&texts[static_cast<size_t>(r) * RankFacts::kText]))},
                 {"gpu_index", facts[1]}, {"cpu_threads", facts[0]}};
    const MeshCoord coords = mesh.coords_of(r);
    for (int a = 0; a < kNumMeshAxes; ++a) rank["coords"][mesh_axis_name(static_cast<MeshAxis>(a))] = coords[static_cast<size_t>(a)];
    for (int k = 0; k < kNumGroupKinds; ++k) {
      const GroupKind kind = kAllGroupKinds[static_cast<size_t>(k)];
      rank["groups"][group_kind_name(kind)] = {{"rank", facts[2 + k]},
                                               {"size", facts[2 + kNumGroupKinds + k]},
                                               {"members", mesh.group_members(kind, r)}};
    }
    report["ranks"].push_back(rank);
  }
  return report;
}

// Both MFU references (train/mfu_peaks.hpp) of this rank for each compute dtype `trlhpc sft` can run:
// the nominal peak of its threads and the measured GEMM rate (the start-up measurement of sft).
json peak_report(const Topology& topo, BackendOptions kernels) {
  json peaks;
  peaks["cpu"] = topo.device() == Device::CPU ? cpu::cpu_model().brand : "";
  peaks["threads"] = topo.cpu_threads();
  for (const DType dtype : {DType::F32, DType::BF16}) {
    kernels.compute_dtype = dtype;
    const std::unique_ptr<Ops> ops = make_ops(topo, kernels);
    const NominalPeak nominal = nominal_peak(*ops, topo.cpu_threads());
    const int64_t side = 2048;  // sft's side for models up to 2048 wide (gemm_measurement_side)
    json& p = peaks[dtype == DType::BF16 ? "bf16" : "fp32"];
    p["nominal"] = nominal.flops_per_second > 0 ? json(nominal.flops_per_second) : json();
    p["nominal_how"] = nominal.describe();
    p["isa"] = nominal.isa;
    p["flops_per_cycle_per_core"] = nominal.flops_per_cycle;
    p["clock_hz"] = nominal.clock.hz;
    p["clock_source"] = nominal.clock.source;
    p["measured_gemm"] = measure_matmul_flops(*ops, side);
    p["measured_gemm_side"] = side;
  }
  return peaks;
}

void print_peaks(std::ostream& out, const json& peaks) {
  const std::string cpu = peaks["cpu"].get<std::string>();
  out << "\nPeak FLOP/s of rank 0 (" << peaks["threads"] << " threads" << (cpu.empty() ? "" : ", " + cpu)
      << "; MFU is against the nominal peak, the log also gives it against the measured GEMM rate)\n";
  for (const char* dtype : {"fp32", "bf16"}) {
    const json& p = peaks[dtype];
    out << "  " << dtype << ": " << p["nominal_how"].get<std::string>() << "; measured GEMM "
        << flops_text(p["measured_gemm"].get<double>()) << " (" << p["measured_gemm_side"] << "^3, best of 4)\n";
  }
}

std::string bracketed(const std::string& text) {
  std::string s = "[";
  s += text;
  s += "]";
  return s;
}

std::string coords_string(const json& coords) {  // "(dpr,dps,cp,sp,tp)"
  std::string s = "(";
  for (const char* axis : {"dp_replicate", "dp_shard", "cp", "sp", "tp"}) {
    if (s.size() > 1) s += ",";
    s += coords[axis].dump();
  }
  s += ")";
  return s;
}

// Left-aligned columns, two spaces apart.
void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  for (const auto& row : rows) {
    std::string line = " ";
    for (size_t c = 0; c < row.size(); ++c) line += " " + row[c] + std::string(width[c] - row[c].size() + 1, ' ');
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

void print_human(std::ostream& out, const json& report) {
  out << "trlhpc " << report["versions"]["trlhpc"].get<std::string>() << " environment\n\nVersions\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, version] : report["versions"].items()) rows.push_back({name, version.get<std::string>()});
  print_table(out, rows);

  out << "\nWorld: " << report["world_size"] << " ranks on " << report["num_nodes"] << " node(s), at most "
      << report["max_ranks_per_node"] << " per node; device: " << report["device_binding"].get<std::string>() << "\n";
  rows = {{"node", "host", "ranks", "GPUs", "CPUs"}};
  for (const auto& n : report["nodes"])
    rows.push_back({std::to_string(n["index"].get<int>()), n["host"].get<std::string>(),
                    rank_list(n["ranks"].get<std::vector<int>>()), std::to_string(n["gpus"].get<int>()),
                    std::to_string(n["cpus"].get<int>())});
  print_table(out, rows);

  const json& m = report["mesh"];
  out << "\nMesh (outer -> inner, tp fastest): dp_replicate " << m["dp_replicate"] << " x dp_shard " << m["dp_shard"]
      << " x cp " << m["cp"] << " x sp " << m["sp"] << " x tp " << m["tp"]
      << (m.value("tp_sequence_parallel", false) ? " (sequence parallel)" : "") << " = " << report["world_size"]
      << " ranks\n";
  rows = {{"rank", "host", "local", "device", "threads", "coords (dpr,dps,cp,sp,tp)"}};
  for (const auto& r : report["ranks"]) {
    rows.push_back({std::to_string(r["rank"].get<int>()), r["host"].get<std::string>(),
                    std::to_string(r["local_rank"].get<int>()) + "/" + std::to_string(r["local_size"].get<int>()),
                    r["device"].get<std::string>(), std::to_string(r["cpu_threads"].get<int>()),
                    coords_string(r["coords"])});
  }
  print_table(out, rows);

  out << "\nGroups (members are world ranks, listed in group-rank order; world = all ranks)\n";
  rows = {{"rank"}};
  for (GroupKind kind : kAllGroupKinds)
    if (kind != GroupKind::World) rows[0].push_back(group_kind_name(kind));
  for (const auto& r : report["ranks"]) {
    std::vector<std::string> row = {std::to_string(r["rank"].get<int>())};
    for (GroupKind kind : kAllGroupKinds)
      if (kind != GroupKind::World)
        row.push_back(bracketed(rank_list(r["groups"][group_kind_name(kind)]["members"].get<std::vector<int>>())));
    rows.push_back(row);
  }
  print_table(out, rows);
}

}  // namespace

int run_env_command(int argc, char** argv, MpiEnvironment& mpi) { return run_env_command(argc, argv, mpi, std::cout); }

int run_env_command(int argc, char** argv, MpiEnvironment& mpi, std::ostream& out) {
  std::string help;
  const EnvOptions options = parse_env_options(argc, argv, help);
  if (options.help) {
    if (mpi.world_rank() == 0) out << help << std::flush;
    return 0;
  }
  // Pure checks first: every rank throws the same UserError before any communication.
  ParallelDims requested = options.dims;
  std::string sharding = options.sharding;
  if (!options.accelerate_config.empty()) {
    // The same reading as `trlhpc sft`: the file's sizes and sharding, unless the flag was given.
    SftConfig c;
    c.dp_replicate_size = requested.dp_replicate, c.dp_shard_size = requested.dp_shard, c.tp_size = requested.tp;
    c.cp_size = requested.cp, c.sp_size = requested.sp, c.sharding = sharding;
    apply_accelerate_config(read_accelerate_config(options.accelerate_config, mpi.world_size()), options.explicit_flags, c);
    requested = ParallelDims{static_cast<int>(c.dp_replicate_size), static_cast<int>(c.dp_shard_size),
                             static_cast<int>(c.cp_size), static_cast<int>(c.sp_size), static_cast<int>(c.tp_size),
                             requested.tp_sequence_parallel};
    sharding = c.sharding;
  }
  ParallelDims dims = requested.resolved(mpi.world_size());
  const ShardingKind sharding_kind = parse_sharding(sharding);
  std::optional<ModelConfig> model;
  if (!options.model.empty())
    model = ModelConfig::from_file(std::filesystem::is_directory(options.model) ? options.model + "/config.json" : options.model);
  // With a model the kv_share groups are the ones training would use (tp > kv heads).
  if (model) dims = dims.for_model(static_cast<int>(model->num_attention_heads), static_cast<int>(model->num_key_value_heads));
  const DeviceRequest request = parse_device_request(options.device);
  choose_kernels(options.kernels);  // before the report names the engines; a refusal is every rank's
  const Topology topo = Topology::discover(mpi, request);
  ProcessGroups groups(Mesh(dims), mpi.world());
  json report = build_report(options, topo, groups);
  if (mpi.world_rank() == 0 && model) {
    MicroBatchShape batch = options.batch;
    batch.cpu_kernels = topo.gpu_index() < 0;
    StepMemoryPlan plan = plan_step_memory(*model, dims, sharding_kind, batch);
    if (batch.cpu_kernels) plan.process_bytes = process_resident_bytes();  // this process: libraries and MPI, no data
    const MemoryAccount& m = plan.persistent;
    report["memory_per_rank"] = {{"model", options.model}, {"architecture", model->architecture_name()},
                                 {"parameters", model->parameter_count()},
                                 {"sharding", sharding_name(sharding_kind)}, {"parameter_bytes", m.parameter_bytes},
                                 {"gradient_bytes", m.gradient_bytes}, {"optimizer_bytes", m.optimizer_bytes},
                                 {"rows", options.batch.rows}, {"max_length", options.batch.seq_len},
                                 {"gradient_checkpointing", options.batch.gradient_checkpointing},
                                 {"gathered_unit_bytes", plan.gathered_unit_bytes},
                                 {"activation_bytes", plan.activation_bytes}, {"loss_bytes", plan.loss_bytes},
                                 {"attention_bytes", plan.attention_bytes}, {"floor_bytes", plan.floor_bytes()},
                                 {"process_bytes", plan.process_bytes},
                                 {"predicted_peak_bytes", plan.predicted_peak_bytes()},
                                 {"cp_size", dims.cp}, {"sp_size", dims.sp}};
    // The layer pattern: S = sliding window, F = full attention (N: no RoPE on that layer).
    std::string pattern;
    for (int64_t l = 0; l < model->num_hidden_layers; ++l)
      pattern += std::string(l ? " " : "") + (model->attention_window(l) > 0 ? "S" : "F") +
                 (model->layer_uses_rope(l) ? "" : "N");
    report["memory_per_rank"]["layer_pattern"] = pattern;
    report["memory_per_rank"]["family"] = model->model_type();
    report["memory_per_rank"]["structure"] = model->structure();
    report["memory_per_rank"]["sliding_window"] = model->sliding_window;
  }
  if (mpi.world_rank() == 0) report["peak_flops_per_rank"] = peak_report(topo, options.kernels);
  if (mpi.world_rank() == 0) {
    if (options.json) {
      out << report.dump(2) << "\n";
    } else {
      print_human(out, report);
      print_peaks(out, report["peak_flops_per_rank"]);
      if (report.contains("memory_per_rank")) {
        const json& m = report["memory_per_rank"];
        auto mib = [](const json& b) {
          char text[32];
          std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(b.get<int64_t>()) / (1024.0 * 1024.0));
          return std::string(text);
        };
        out << "\nMemory per rank (" << m["architecture"].get<std::string>() << ", " << m["parameters"]
            << " parameters, sharding " << m["sharding"].get<std::string>()
            << ", fp32): parameters " << mib(m["parameter_bytes"]) << ", gradients " << mib(m["gradient_bytes"])
            << ", optimizer " << mib(m["optimizer_bytes"]) << "; a step of " << m["rows"] << " x " << m["max_length"]
            << " tokens" << (m["gradient_checkpointing"].get<bool>() ? " with gradient checkpointing" : "")
            << " adds the largest gathered unit + gradient " << mib(m["gathered_unit_bytes"]) << ", activations "
            << mib(m["activation_bytes"]) << ", loss chunk " << mib(m["loss_bytes"]) << ", attention "
            << mib(m["attention_bytes"]) << ": floor " << mib(m["floor_bytes"]);
        if (m["process_bytes"].get<int64_t>() > 0)
          out << "; with this process (" << mib(m["process_bytes"]) << ", before any data) a predicted peak of "
              << mib(m["predicted_peak_bytes"]) << " resident";
        out << "\n";
        std::string structure;
        for (const json& part : m["structure"]) structure += (structure.empty() ? "" : ", ") + part.get<std::string>();
        out << "Family " << m["family"].get<std::string>() << ": " << structure << "\n";
        out << "Layers (S = sliding window " << m["sliding_window"] << ", F = full attention, N = no RoPE): "
            << m["layer_pattern"].get<std::string>() << "\n";
      }
    }
    out << std::flush;
  }
  return 0;
}

}  // namespace trlhpc
