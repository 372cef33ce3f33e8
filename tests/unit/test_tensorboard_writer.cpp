// The TensorBoard event writer's pieces against independent references: CRC-32C against the test
// vectors of RFC 3720 (appendix B.4) and the standard check value; protobuf encoding against the
// worked example of the protobuf encoding guide; Event protos and TFRecord framing against bytes from
// the protobuf library and tensorboard's own RecordWriter (tests/fixtures/make_tensorboard_fixtures.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "trlhpc/core/error.hpp"
#include "trlhpc/io/crc32c.hpp"
#include "trlhpc/io/protobuf_wire.hpp"
#include "trlhpc/io/tensorboard_writer.hpp"
#include "trlhpc/train/metrics_logger.hpp"
#include "test_support.hpp"

namespace trlhpc {
namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += {digits[c >> 4], digits[c & 15]};
  return out;
}

std::string unhex(const std::string& text) {
  std::string out;
  for (size_t i = 0; i + 1 < text.size(); i += 2) out.push_back(static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16)));
  return out;
}

TEST(Crc32c, Rfc3720Vectors) {
  // RFC 3720 B.4 prints each CRC as the bytes sent, least significant first: "aa 36 91 8a" = 0x8A9136AA.
  std::string zeros(32, '\0'), ones(32, '\xff'), ascending(32, 0), descending(32, 0);
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i), descending[i] = static_cast<char>(31 - i);
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c(descending), 0x113FDB5Cu);
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the catalogued check value of CRC-32C
  EXPECT_EQ(crc32c(""), 0u);
}

TEST(ProtobufWire, EncodingGuideExamples) {
  // "message Test1 { int32 a = 1; }" with a = 150 encodes as 08 96 01.
  EXPECT_EQ(hex(ProtobufMessage().add_varint(1, 150).bytes()), "089601");
  // "message Test2 { string b = 2; }" with b = "testing" encodes as 12 07 74 65 73 74 69 6e 67.
  EXPECT_EQ(hex(ProtobufMessage().add_bytes(2, "testing").bytes()), "120774657374696e67");
  // "message Test3 { Test1 c = 3; }" embeds Test1 as a length-delimited field: 1a 03 08 96 01.
  EXPECT_EQ(hex(ProtobufMessage().add_message(3, ProtobufMessage().add_varint(1, 150)).bytes()), "1a03089601");
  // Fixed-width fields are little-endian IEEE values after a key of wire type 1 / 5.
  EXPECT_EQ(hex(ProtobufMessage().add_double(1, 1.0).bytes()), "09000000000000f03f");
  EXPECT_EQ(hex(ProtobufMessage().add_float(2, 1.0f).bytes()), "150000803f");
  // A 10-byte varint (the largest) and a field number past 15 (two-byte key).
  EXPECT_EQ(hex(ProtobufMessage().add_varint(16, ~uint64_t{0}).bytes()), "8001ffffffffffffffffff01");
}

TEST(TensorBoardEvents, EqualTheProtobufLibrarysBytes) {
  const auto fixture = nlohmann::json::parse(std::ifstream(testing::tests_dir() + "/fixtures/tensorboard_expected.json"));
  int checked = 0;
  for (const auto& c : fixture.at("cases")) {
    const std::string name = c.at("name");
    std::string got;
    if (name == "file_version_event") {
      got = tensorboard::file_version_event(c.at("wall_time"));
    } else if (name.rfind("scalars_event", 0) == 0) {
      TensorBoardScalars scalars;
      for (const auto& s : c.at("scalars")) scalars.emplace_back(s.at(0), s.at(1));
      got = tensorboard::scalars_event(c.at("wall_time"), c.at("step"), scalars);
    } else {
      got = tensorboard::tfrecord(unhex(c.at("payload_hex")));
    }
    EXPECT_EQ(hex(got), c.at("hex").get<std::string>()) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

TEST(TensorBoardWriter, FileIsTheFramedRecords) {
  const std::filesystem::path dir = testing::make_temp_dir("tensorboard_writer");
  std::string path;
  {
    TensorBoardWriter writer((dir / "runs" / "x").string());
    writer.add_scalars(3, {{"train/loss", 1.5}});
    writer.add_scalars(4, {});  // nothing to write: no record
    path = writer.path();
  }
  EXPECT_NE(std::filesystem::path(path).filename().string().find("tfevents"), std::string::npos);
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Two records: version, then the scalars. Walk the framing and check both CRCs of each.
  size_t offset = 0;
  int records = 0;
  while (offset < bytes.size()) {
    ASSERT_LE(offset + 12, bytes.size());
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[offset + i]);
    ASSERT_LE(offset + 16 + length, bytes.size());
    EXPECT_EQ(tensorboard::tfrecord(bytes.substr(offset + 12, length)), bytes.substr(offset, 16 + length));
    if (records == 1) EXPECT_NE(bytes.substr(offset + 12, length).find("train/loss"), std::string::npos);
    offset += 16 + length;
    ++records;
  }
  EXPECT_EQ(records, 2);
  std::filesystem::remove_all(dir);
}

TEST(TensorBoardWriter, UnwritableFolderIsAUserError) {
  EXPECT_THROW(TensorBoardWriter{"/proc/trlhpc_cannot_be_here"}, UserError);
}

// transformers' rewrite_logs: eval_X -> eval/X, test_X -> test/X, anything else -> train/X; the step is
// the event's step and strings/nulls are not scalars.
TEST(TensorBoardScalars, NamedAsTransformersTensorBoardCallback) {
  const auto line = nlohmann::json::parse(
      R"({"step": 3, "loss": 1.5, "eval_loss": 2.0, "test_accuracy": 1, "epoch": 0.5, "note": "x", "grad_norm": null})");
  TensorBoardScalars got = tensorboard_scalars(line);
  std::sort(got.begin(), got.end());
  const TensorBoardScalars want = {{"eval/loss", 2.0}, {"test/accuracy", 1.0}, {"train/epoch", 0.5}, {"train/loss", 1.5}};
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace trlhpc
