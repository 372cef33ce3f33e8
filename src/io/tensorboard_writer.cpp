#include "trlhpc/io/tensorboard_writer.hpp"

#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "trlhpc/core/error.hpp"
#include "trlhpc/io/crc32c.hpp"
#include "trlhpc/io/protobuf_wire.hpp"

namespace trlhpc {

namespace tensorboard {

namespace {
// Field numbers of event.proto / summary.proto.
constexpr int kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
constexpr int kSummaryValue = 1;
constexpr int kValueTag = 1, kValueSimpleValue = 2;

std::string little_endian(uint64_t value, int size) {
  std::string out;
  for (int i = 0; i < size; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  return out;
}
}  // namespace

std::string tfrecord(std::string_view payload) {
  const std::string length = little_endian(payload.size(), 8);
  std::string record = length;
  record += little_endian(masked_crc32c(crc32c(length)), 4);
  record.append(payload);
  record += little_endian(masked_crc32c(crc32c(payload)), 4);
  return record;
}

std::string file_version_event(double wall_time) {
  ProtobufMessage event;
  event.add_double(kEventWallTime, wall_time).add_bytes(kEventFileVersion, "brain.Event:2");
  return event.bytes();
}

std::string scalars_event(double wall_time, int64_t step, const TensorBoardScalars& scalars) {
  ProtobufMessage summary;
  for (const auto& [tag, value] : scalars) {
    ProtobufMessage v;
    v.add_bytes(kValueTag, tag).add_float(kValueSimpleValue, static_cast<float>(value));
    summary.add_message(kSummaryValue, v);
  }
  ProtobufMessage event;
  event.add_double(kEventWallTime, wall_time);
  // proto3 leaves fields at their default value off the wire; a reader sees step 0 either way.
  if (step != 0) event.add_varint(kEventStep, static_cast<uint64_t>(step));
  event.add_message(kEventSummary, summary);
  return event.bytes();
}

}  // namespace tensorboard

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof buffer - 1) != 0) return "localhost";
  return buffer;
}
}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& logging_dir) {
  std::error_code error;
  std::filesystem::create_directories(logging_dir, error);
  if (error)
    throw UserError("--logging_dir " + logging_dir + ": cannot create it (" + error.message() +
                    "); choose a writable folder or --report_to none");
  const double wall_time = now_seconds();
  path_ = (std::filesystem::path(logging_dir) / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(wall_time)) +
                                                 "." + host_name() + "." + std::to_string(getpid())))
              .string();
  file_.reset(std::fopen(path_.c_str(), "ab"));
  if (!file_)
    throw UserError("--logging_dir " + logging_dir + ": cannot write " + path_ + " (" + std::strerror(errno) +
                    "); choose a writable folder or --report_to none");
  write_record(tensorboard::file_version_event(wall_time));
}

void TensorBoardWriter::add_scalars(int64_t step, const TensorBoardScalars& scalars) {
  if (scalars.empty()) return;
  write_record(tensorboard::scalars_event(now_seconds(), step, scalars));
}

void TensorBoardWriter::write_record(std::string_view payload) {
  const std::string record = tensorboard::tfrecord(payload);
  std::fwrite(record.data(), 1, record.size(), file_.get());
  std::fflush(file_.get());
}

}  // namespace trlhpc
