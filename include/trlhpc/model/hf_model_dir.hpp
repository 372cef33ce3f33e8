#pragma once
// Hugging Face model directories, in and out.
//
// In: `HfModelDir` opens a directory holding config.json and either model.safetensors or
// model.safetensors.index.json (whose "weight_map" maps each tensor name to its shard file; transformers
// prefers the single file when both exist, and so does this). Opening validates the config, every
// shard's header, and that every parameter of the config (parameter_names.hpp) is present with the
// right shape, so a wrong or incomplete checkpoint fails before training starts, naming the tensor,
// the file, and the expected and found shapes, and that every parameter is finite (a NaN or inf names the
// file, the tensor and the element; every rank reads all weights once for that). With tie_word_embeddings there is no lm_head parameter
// (a stored lm_head.weight is ignored, as transformers ties it to the embedding). Each rank then loads
// only the slices it owns (read_parameter / read_flat_range).
//
// Out: `save_hf_model_dir` writes config.json + model.safetensors (F32 or BF16) and copies the tokenizer
// files, loadable by transformers' AutoModelForCausalLM/AutoTokenizer.from_pretrained. It writes
// everything into `<dir>.tmp` first (`<dir>/.model.tmp` when `<dir>` exists: it may be a mount point, and a
// rename must not cross file systems). A new `<dir>` is then created by renaming the whole folder; an
// existing `<dir>` (e.g. a training output_dir holding metrics.jsonl and checkpoints) is never removed:
// each finished file is renamed into it, replacing any older one atomically. Call it on one rank.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "trlhpc/core/dtype.hpp"
#include "trlhpc/io/safetensors.hpp"
#include "trlhpc/model/model_config.hpp"
#include "trlhpc/model/parameter_names.hpp"

namespace trlhpc {

class HfModelDir {
 public:
  // Opens and validates `dir` (see above); UserError naming the directory or file and the problem.
  explicit HfModelDir(const std::string& dir);

  const std::string& path() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  // The parameters of config(), in parameter_specs order (all verified present with the right shape).
  const std::vector<ParameterSpec>& parameters() const { return parameters_; }

  bool has_tensor(const std::string& name) const { return location_.count(name) != 0; }
  // The shard that holds `name`; UserError naming the tensor and the directory when absent.
  const SafetensorsReader& file_of(const std::string& name) const;
  const SafetensorsTensorInfo& tensor_info(const std::string& name) const { return file_of(name).info(name); }

  // Flat elements [begin, end) of tensor `name`, as fp32, into out[0 .. end-begin).
  void read_tensor(const std::string& name, int64_t begin, int64_t end, float* out) const;
  // Same for a parameter (its shape was checked when the directory was opened).
  void read_parameter(const ParameterSpec& spec, int64_t begin, int64_t end, float* out) const;
  // Elements [begin, end) of the concatenation of `specs` (e.g. one unit's flat buffer); indices past
  // the total (padding) are set to 0. The loading counterpart of init_flat_range (init.hpp).
  void read_flat_range(const std::vector<ParameterSpec>& specs, int64_t begin, int64_t end, float* out) const;

 private:
  void open_single(const std::string& file);
  void open_sharded(const std::string& index_file);
  void check_parameters() const;
  void check_finite() const;  // UserError naming the file, tensor and element of the first NaN/inf

  std::string dir_;
  ModelConfig config_;
  std::vector<ParameterSpec> parameters_;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::unordered_map<std::string, size_t> location_;  // tensor name -> index into files_
};

// Tokenizer and generation files copied by save_hf_model_dir when present in the source directory.
const std::vector<std::string>& hf_tokenizer_file_names();
// Copies those found in `source_dir` (none when empty) into the existing directory `dir`.
void copy_hf_tokenizer_files(const std::string& source_dir, const std::string& dir);

struct HfSaveOptions {
  DType dtype = DType::F32;          // model.safetensors element type: F32 or BF16
  std::string tokenizer_source_dir;  // copy hf_tokenizer_file_names() found here ("" = copy nothing)
};

// Writes a Hugging Face model directory (see above) one parameter at a time, so a caller that gathers
// parameters unit by unit never holds the whole model: the constructor starts `<dir>.tmp` with
// config.json (torch_dtype follows options.dtype) and the model.safetensors header; append() streams the
// parameters in parameter_specs(config) order; finish() copies the tokenizer files and moves everything
// into place. Destroyed without finish(), it leaves no model.safetensors (a stale staging folder is
// cleared by the next save).
class HfModelWriter {
 public:
  HfModelWriter(const std::string& output_dir, const ModelConfig& config, const HfSaveOptions& options = {});
  ~HfModelWriter();
  HfModelWriter(const HfModelWriter&) = delete;
  HfModelWriter& operator=(const HfModelWriter&) = delete;

  // The full value of the next parameter (numel floats); `name` must be the next of parameter_specs.
  void append(const std::string& name, const float* data, int64_t numel);
  void finish();

 private:
  std::string target_, temp_;  // the directory and its staging folder ("<dir>.tmp", or "<dir>/.model.tmp")
  HfSaveOptions options_;
  std::vector<ParameterSpec> specs_;
  size_t next_ = 0;  // index into specs_ of the parameter append() expects
  std::unique_ptr<SafetensorsWriter> weights_;
};

// Fills `out` (spec.numel() floats) with the full value of one parameter. Called once per parameter,
// in parameter_specs(config) order.
using ParameterSource = std::function<void(const ParameterSpec& spec, float* out)>;

// Writes a Hugging Face model directory (see above) from a source of whole parameters (HfModelWriter
// with one parameter-sized buffer).
void save_hf_model_dir(const std::string& output_dir, const ModelConfig& config, const ParameterSource& source,
                       const HfSaveOptions& options = {});

}  // namespace trlhpc
