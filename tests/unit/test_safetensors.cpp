// safetensors: write/read round trips, slices, the real stories260K file, and rejection of bad files.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/io/safetensors.hpp"

namespace trlhpc {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = ::trlhpc::testing::make_temp_dir("safetensors"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }

  // Writes [u64 header length][header][data] verbatim.
  std::string craft(const std::string& name, const std::string& header, const std::string& data,
                    uint64_t length_override = 0) const {
    const std::string path = file(name);
    std::ofstream out(path, std::ios::binary);
    const uint64_t length = length_override ? length_override : header.size();
    out.write(reinterpret_cast<const char*>(&length), 8);
    out << header << data;
    return path;
  }

  // Opening `path` must throw a UserError naming the file and containing `needle`.
  static void expect_invalid(const std::string& path, const std::string& needle) {
    try {
      SafetensorsReader reader(path);
      ADD_FAILURE() << path << " was accepted";
    } catch (const UserError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << message;
      EXPECT_NE(message.find(needle), std::string::npos) << message;
    }
  }

  std::string dir_;
};

TEST_F(SafetensorsTest, F32RoundTripIsBitExact) {
  const auto a = ::trlhpc::testing::random_floats(6 * 5, 1);
  const auto b = ::trlhpc::testing::random_floats(7, 2);
  const float scalar = 3.25f;
  write_safetensors(file("m.safetensors"),
                    {{"a", {6, 5}, a.data()}, {"b.bias", {7}, b.data()}, {"s", {}, &scalar}, {"empty", {0, 4}, nullptr}},
                    DType::F32);
  EXPECT_FALSE(fs::exists(file("m.safetensors.tmp")));

  SafetensorsReader reader(file("m.safetensors"));
  ASSERT_EQ(reader.tensors().size(), 4u);
  EXPECT_EQ(reader.metadata().at("format"), "pt");
  EXPECT_EQ(reader.info("a").shape, (Shape{6, 5}));
  EXPECT_EQ(reader.info("a").dtype, "F32");
  EXPECT_EQ(reader.info("s").shape, Shape{});
  EXPECT_EQ(reader.info("empty").numel(), 0);
  const auto got_a = reader.read_f32("a");
  const auto got_b = reader.read_f32("b.bias");
  EXPECT_EQ(std::memcmp(got_a.data(), a.data(), a.size() * 4), 0);
  EXPECT_EQ(std::memcmp(got_b.data(), b.data(), b.size() * 4), 0);
  EXPECT_EQ(reader.read_f32("s"), std::vector<float>{3.25f});
  EXPECT_TRUE(reader.read_f32("empty").empty());

  // The data section starts 8-byte aligned, as the reference writer pads it.
  std::ifstream in(file("m.safetensors"), std::ios::binary);
  uint64_t header_length = 0;
  in.read(reinterpret_cast<char*>(&header_length), 8);
  EXPECT_EQ((8 + header_length) % 8, 0u);
}

TEST_F(SafetensorsTest, Bf16RoundTripRoundsToNearestEven) {
  auto values = ::trlhpc::testing::random_floats(1000, 3, 10.0f);
  values[0] = 1.00390625f;  // exactly halfway between two bf16 values: rounds to even (1.0)
  write_safetensors(file("h.safetensors"), {{"w", {10, 100}, values.data()}}, DType::BF16);
  SafetensorsReader reader(file("h.safetensors"));
  EXPECT_EQ(reader.info("w").dtype, "BF16");
  EXPECT_EQ(reader.bytes("w").size(), 2000u);
  const auto got = reader.read_f32("w");
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(got[i], bf16_to_f32(f32_to_bf16(values[i]))) << i;
  EXPECT_EQ(got[0], 1.0f);
}

TEST_F(SafetensorsTest, SliceReads) {
  const auto values = ::trlhpc::testing::random_floats(12 * 11, 4);
  write_safetensors(file("f.safetensors"), {{"x", {12, 11}, values.data()}}, DType::F32);
  write_safetensors(file("b.safetensors"), {{"x", {12, 11}, values.data()}}, DType::BF16);
  SafetensorsReader f32(file("f.safetensors")), bf16(file("b.safetensors"));
  const std::vector<float> full_bf16 = bf16.read_f32("x");
  for (auto [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 132}, {0, 1}, {5, 77}, {131, 132}, {40, 40}}) {
    std::vector<float> got(static_cast<size_t>(end - begin)), got_bf16(got.size());
    f32.read_f32("x", begin, end, got.data());
    bf16.read_f32("x", begin, end, got_bf16.data());
    for (int64_t i = begin; i < end; ++i) {
      ASSERT_EQ(got[static_cast<size_t>(i - begin)], values[static_cast<size_t>(i)]) << i;
      ASSERT_EQ(got_bf16[static_cast<size_t>(i - begin)], full_bf16[static_cast<size_t>(i)]) << i;
    }
  }
  std::vector<float> out(2);
  EXPECT_THROW(f32.read_f32("x", 131, 133, out.data()), RuntimeFailure);
}

TEST_F(SafetensorsTest, ChunkedWriterAndAbandonedWriter) {
  const auto values = ::trlhpc::testing::random_floats(30, 5);
  {
    SafetensorsWriter writer(file("c.safetensors"), {{"p", {4, 5}}, {"q", {10}}}, DType::F32);
    writer.append(values.data(), 7);  // chunks that straddle the tensor boundary
    writer.append(values.data() + 7, 23);
    writer.finish();
  }
  SafetensorsReader reader(file("c.safetensors"));
  EXPECT_EQ(reader.read_f32("q"), std::vector<float>(values.begin() + 20, values.end()));
  {
    SafetensorsWriter writer(file("gone.safetensors"), {{"p", {4}}}, DType::F32);
    writer.append(values.data(), 2);
  }  // destroyed before finish: nothing left behind
  EXPECT_FALSE(fs::exists(file("gone.safetensors")));
  EXPECT_FALSE(fs::exists(file("gone.safetensors.tmp")));
}

TEST_F(SafetensorsTest, ReadsOtherDtypes) {
  const uint16_t halves[2] = {f32_to_f16(1.5f), f32_to_f16(-2.0f)};
  const int32_t ints[2] = {7, -9};
  const int64_t longs[1] = {123456};
  std::string data(reinterpret_cast<const char*>(halves), 4);
  data.append(reinterpret_cast<const char*>(ints), 8).append(reinterpret_cast<const char*>(longs), 8);
  data.append(2, '\0');
  const std::string path = craft("d.safetensors",
                                 R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                                 R"("i":{"dtype":"I32","shape":[2],"data_offsets":[4,12]},)"
                                 R"("l":{"dtype":"I64","shape":[1],"data_offsets":[12,20]},)"
                                 R"("u":{"dtype":"U8","shape":[2],"data_offsets":[20,22]},)"
                                 R"("__metadata__":{"format":"pt"}})",
                                 data);
  SafetensorsReader reader(path);
  EXPECT_EQ(reader.read_f32("h"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(reader.read_f32("i"), (std::vector<float>{7.0f, -9.0f}));
  EXPECT_EQ(reader.read_f32("l"), (std::vector<float>{123456.0f}));
  EXPECT_THROW(reader.read_f32("u"), UserError);  // listed and valid, but not convertible
  EXPECT_THROW(reader.info("nope"), UserError);
}

TEST_F(SafetensorsTest, ReadsStories260K) {
  SafetensorsReader reader(::trlhpc::testing::shared_data_dir() + "/stories260K/model.safetensors");
  EXPECT_EQ(reader.tensors().size(), 47u);  // embedding, 5 layers x 9, final norm; tied head
  EXPECT_FALSE(reader.contains("lm_head.weight"));
  const auto& embed = reader.info("model.embed_tokens.weight");
  EXPECT_EQ(embed.dtype, "F32");
  EXPECT_EQ(embed.shape, (Shape{512, 64}));
  EXPECT_EQ(reader.info("model.layers.4.mlp.down_proj.weight").shape, (Shape{64, 172}));
  const auto full = reader.read_f32("model.embed_tokens.weight");
  double sum_sq = 0;
  for (float v : full) sum_sq += double(v) * v;
  EXPECT_GT(sum_sq, 1.0);  // real, non-zero weights
  std::vector<float> row(64);
  reader.read_f32("model.embed_tokens.weight", 64 * 300, 64 * 301, row.data());
  EXPECT_EQ(std::memcmp(row.data(), full.data() + 64 * 300, 64 * 4), 0);
}

TEST_F(SafetensorsTest, RejectsTruncatedFiles) {
  const std::string source = ::trlhpc::testing::shared_data_dir() + "/stories260K/model.safetensors";
  std::ifstream in(source, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(file("tiny.safetensors"), std::ios::binary) << bytes.substr(0, 5);
  expect_invalid(file("tiny.safetensors"), "truncated");
  std::ofstream(file("header.safetensors"), std::ios::binary) << bytes.substr(0, 100);
  expect_invalid(file("header.safetensors"), "truncated");
  std::ofstream(file("half.safetensors"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_invalid(file("half.safetensors"), "outside the data section");
  std::ofstream(file("empty.safetensors"), std::ios::binary);
  expect_invalid(file("empty.safetensors"), "truncated");
}

TEST_F(SafetensorsTest, RejectsMalformedHeaders) {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data(8, '\0');
  expect_invalid(craft("len.safetensors", "{" + ok_entry + "}", data, uint64_t{1} << 40), "header length");
  expect_invalid(craft("json.safetensors", "{" + ok_entry, data), "not valid JSON");
  expect_invalid(craft("array.safetensors", "[1, 2]", data), "not a JSON object");
  expect_invalid(craft("range.safetensors", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data),
                 "outside the data section");
  expect_invalid(craft("size.safetensors", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data),
                 "needs 12");
  expect_invalid(craft("dtype.safetensors", R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", data),
                 "unknown dtype 'F31'");
  expect_invalid(craft("overlap.safetensors",
                       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                       data),
                 "overlap or leave a gap");
  expect_invalid(craft("gap.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data),
                 "overlap or leave a gap");
  expect_invalid(craft("tail.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", data),
                 "cover 4 bytes");
  expect_invalid(craft("fields.safetensors", R"({"a":{"dtype":"F32","shape":[2]}})", data), "data_offsets");
  expect_invalid(craft("neg.safetensors", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data),
                 "shape");
  expect_invalid(craft("meta.safetensors", R"({"__metadata__":{"format":1},)" + ok_entry + "}", data),
                 "__metadata__.format");
  // A missing file is a UserError naming it, too.
  expect_invalid(file("missing.safetensors"), "cannot open");
}

}  // namespace
}  // namespace trlhpc
