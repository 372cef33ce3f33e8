#include "trlhpc/data/dataset/cache.hpp"

#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "trlhpc/core/splitmix64.hpp"
#include "trlhpc/data/batching/packing.hpp"
#include "trlhpc/data/chat_template/chat_template.hpp"
#include "trlhpc/data/dataset/reader.hpp"

namespace trlhpc::dataset {
namespace {

namespace fs = std::filesystem;
static_assert(std::endian::native == std::endian::little, "the dataset cache is written in host (little-endian) order");

constexpr char kMagic[8] = {'T', 'R', 'L', 'H', 'T', 'O', 'K', 'C'};
constexpr size_t kStatsCount = 9;

// FNV-1a over length-framed fields, so ("ab","c") and ("a","bc") differ.
class Hasher {
 public:
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= p[i];
      h_ *= 1099511628211ull;
    }
  }
  void u64(uint64_t v) { bytes(&v, sizeof v); }
  void field(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  void field(const char* name, const std::string& value) {
    field(std::string(name));
    field(value);
  }
  uint64_t value() const {
    // Final avalanche (splitmix64) so near-identical inputs spread over the whole key.
    return splitmix64(h_);
  }

 private:
  uint64_t h_ = 1469598103934665603ull;
};

bool read_file_bytes(const fs::path& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

// A 64-bit digest of a file's bytes, read in 1 MiB blocks and hashed a word at a time (a multiply-xorshift
// mix; about 3 GB/s, so a 1 GB dataset costs rank 0 a third of a second per start). Not cryptographic:
// it tells the user's own files apart, it does not defend against collisions made on purpose.
uint64_t content_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ~uint64_t{0};
  std::vector<char> block(1 << 20);
  uint64_t h = 0x243f6a8885a308d3ull, length = 0;
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const size_t n = static_cast<size_t>(in.gcount());
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, block.data() + i, 8);
      h = (h ^ w) * 0x9e3779b97f4a7c15ull;
      h ^= h >> 29;
    }
    for (; i < n; ++i) h = (h ^ static_cast<unsigned char>(block[i])) * 0x100000001b3ull;
    length += n;
  }
  return h ^ length;
}

template <typename T>
void put(std::string& buf, const T& v) {
  buf.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// A bounds-checked cursor over the file's bytes.
class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  template <typename T>
  bool get(T& v) {
    return raw(&v, sizeof v);
  }
  bool raw(void* out, size_t n) {
    if (n > data_.size() - pos_) return false;
    std::memcpy(out, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t remaining() const { return data_.size() - pos_; }

 private:
  const std::string& data_;
  size_t pos_ = 0;
};

}  // namespace

uint64_t dataset_cache_key(const SftDataOptions& o, bool has_tokenizer) {
  Hasher h;
  h.field("trlhpc-dataset-cache");
  h.u64(kDatasetCacheVersion);
  const DatasetSource source = effective_source(o);
  const std::vector<DatasetPart> parts = resolve_source(source);
  h.u64(parts.size());
  for (const DatasetPart& part : parts) {
    h.u64(part.files.size());
    // By content, not by path or mtime: a dataset copied to another file system (scratch, a node-local
    // disk) or re-downloaded into a new Hub cache snapshot hits the same cache entry. The file name stays
    // in the key because it decides the reading order and the form checks' messages.
    for (const std::string& f : part.files) {
      h.field("file", fs::path(f).filename().string());
      std::error_code ec;
      const uintmax_t size = fs::file_size(f, ec);
      h.u64(ec ? ~uint64_t{0} : static_cast<uint64_t>(size));
      h.u64(content_digest(f));
    }
    h.u64(part.columns.size());
    for (const std::string& column : part.columns) h.field("column", column);
  }
  // One side of a train/test cut: the size, the side and the seed choose its rows.
  h.u64(source.test_split_size ? 1 : 0);
  if (source.test_split_size) {
    h.u64(std::bit_cast<uint64_t>(*source.test_split_size));
    h.u64(source.test_side ? 1 : 0);
    h.u64(o.seed);
  }
  h.u64(has_tokenizer ? 1 : 0);
  if (!o.tokenizer_dir.empty()) {
    for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"}) {
      std::string bytes;
      const bool present = read_file_bytes(fs::path(o.tokenizer_dir) / name, bytes);
      h.field(name, present ? "present" : "absent");
      if (present) h.field(bytes);
    }
  }
  std::string chat_template;
  try {
    chat_template = chat_template::load_chat_template(o.tokenizer_dir, o.chat_template_path);
  } catch (const std::exception&) {
    chat_template.clear();  // no template: only non-conversational datasets can be used, and they ignore it
  }
  h.field("chat_template", chat_template);
  h.field("split", o.split);
  h.u64(static_cast<uint64_t>(o.vocab_size));  // a cache validated against one vocabulary only
  h.field("text_field", o.text_field);
  h.field("chat_template_path", o.chat_template_path);
  h.field("chat_template_kwargs", o.chat_template_kwargs.dump());
  h.field("max_length", std::to_string(o.max_length));
  const bool truncate = !(o.packing && batching::parse_packing_strategy(o.packing_strategy) == batching::PackingStrategy::kWrapped);
  h.field("truncate", truncate ? "1" : "0");
  // Fields added after the key's first version enter it only when set, so a cache written without them
  // is still found.
  if (o.truncation_mode == batching::TruncationMode::kKeepEnd && !o.packing) h.field("truncation_mode", "keep_end");
  if (!o.eos_token.empty()) h.field("eos_token", o.eos_token);
  if (!o.pad_token.empty()) h.field("pad_token", o.pad_token);
  h.field("completion_only_loss", o.completion_only_loss ? (*o.completion_only_loss ? "true" : "false") : "auto");
  h.field("assistant_only_loss", o.assistant_only_loss ? "1" : "0");
  h.field("skip_bad_rows", o.skip_bad_rows ? "1" : "0");
  return h.value();
}

std::string dataset_cache_path(const std::string& cache_dir, uint64_t key) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  return (fs::path(cache_dir) / (std::string(hex) + ".tokens")).string();
}

bool write_dataset_cache(const std::string& path, uint64_t key, const DatasetCacheEntry& entry, std::string* error) {
  uint64_t total = 0;
  for (const TokenizedExample& ex : entry.examples) {
    if (ex.loss_mask.size() != ex.input_ids.size()) {
      if (error) *error = "an example's loss mask and ids differ in length";
      return false;
    }
    total += ex.input_ids.size();
  }
  std::string buf;
  buf.reserve(72 + entry.stats.form.size() + (entry.examples.size() + 1) * 8 + total * 5);
  buf.append(kMagic, sizeof kMagic);
  put(buf, kDatasetCacheVersion);
  put(buf, uint32_t{0});
  put(buf, key);
  put(buf, static_cast<uint64_t>(entry.examples.size()));
  put(buf, total);
  const SftDataStats& s = entry.stats;
  for (int64_t v : {s.rows_read, s.rows_skipped, s.examples, s.truncated, s.tokens, s.target_tokens, s.untrained_examples,
                    s.end_of_turn.marked, s.end_of_turn.missing})
    put(buf, v);
  put(buf, static_cast<uint32_t>(s.form.size()));
  buf.append(s.form);
  uint64_t offset = 0;
  put(buf, offset);
  for (const TokenizedExample& ex : entry.examples) put(buf, offset += ex.input_ids.size());
  for (const TokenizedExample& ex : entry.examples)
    buf.append(reinterpret_cast<const char*>(ex.input_ids.data()), ex.input_ids.size() * sizeof(int32_t));
  for (const TokenizedExample& ex : entry.examples)
    buf.append(reinterpret_cast<const char*>(ex.loss_mask.data()), ex.loss_mask.size());

  std::error_code ec;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (out) out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (!out || !out.flush()) {
      if (error) *error = "cannot write " + tmp;
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    if (error) *error = "cannot rename " + tmp + " to " + path + ": " + ec.message();
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

std::optional<DatasetCacheEntry> read_dataset_cache(const std::string& path, uint64_t key, std::string* warning) {
  if (warning) warning->clear();
  std::string data;
  if (!read_file_bytes(path, data)) return std::nullopt;  // no file: a plain miss
  auto bad = [&](const std::string& why) -> std::optional<DatasetCacheEntry> {
    if (warning) *warning = "dataset cache " + path + " ignored (" + why + "); tokenizing again";
    return std::nullopt;
  };
  Reader r(data);
  char magic[sizeof kMagic];
  if (!r.raw(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0) return bad("bad magic");
  uint32_t version = 0, reserved = 0;
  if (!r.get(version) || !r.get(reserved)) return bad("truncated header");
  if (version != kDatasetCacheVersion)
    return bad("version " + std::to_string(version) + ", expected " + std::to_string(kDatasetCacheVersion));
  uint64_t file_key = 0, count = 0, total = 0;
  if (!r.get(file_key) || !r.get(count) || !r.get(total)) return bad("truncated header");
  if (file_key != key) return bad("key mismatch");
  DatasetCacheEntry entry;
  SftDataStats& s = entry.stats;
  int64_t stats[kStatsCount];
  for (int64_t& v : stats)
    if (!r.get(v)) return bad("truncated header");
  s.rows_read = stats[0], s.rows_skipped = stats[1], s.examples = stats[2], s.truncated = stats[3], s.tokens = stats[4],
  s.target_tokens = stats[5], s.untrained_examples = stats[6], s.end_of_turn.marked = stats[7],
  s.end_of_turn.missing = stats[8];
  uint32_t form_size = 0;
  if (!r.get(form_size) || form_size > r.remaining()) return bad("truncated header");
  s.form.resize(form_size);
  r.raw(s.form.data(), form_size);
  // Exact size check before allocating anything sized by the file's counts.
  const size_t rest = r.remaining();
  if (count >= rest / 8 || total > rest) return bad("size does not match its counts");
  if (rest != (count + 1) * 8 + total * 5) return bad("size does not match its counts");
  std::vector<uint64_t> offsets(count + 1);
  r.raw(offsets.data(), offsets.size() * 8);
  if (offsets.front() != 0 || offsets.back() != total) return bad("bad offsets");
  for (size_t i = 0; i < count; ++i)
    if (offsets[i + 1] < offsets[i]) return bad("bad offsets");
  entry.examples.resize(count);
  for (size_t i = 0; i < count; ++i) {
    TokenizedExample& ex = entry.examples[i];
    ex.input_ids.resize(offsets[i + 1] - offsets[i]);
    r.raw(ex.input_ids.data(), ex.input_ids.size() * sizeof(int32_t));
  }
  for (size_t i = 0; i < count; ++i) {
    TokenizedExample& ex = entry.examples[i];
    ex.loss_mask.resize(offsets[i + 1] - offsets[i]);
    r.raw(ex.loss_mask.data(), ex.loss_mask.size());
  }
  if (s.examples != static_cast<int64_t>(count) || s.tokens != static_cast<int64_t>(total) || s.untrained_examples < 0 ||
      s.untrained_examples > s.examples)
    return bad("stats do not match the examples");
  return entry;
}

}  // namespace trlhpc::dataset
