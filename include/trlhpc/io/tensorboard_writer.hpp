#pragma once
// TensorBoardWriter: scalar summaries in TensorBoard's native event-file format, without TensorFlow,
// Python or a protobuf library.
//
// An event file (`events.out.tfevents.<seconds>.<host>.<pid>`) is a TFRecord stream: each record is
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes) | payload | uint32 masked_crc32c(payload)
// (TensorFlow's core/lib/io/record_writer.cc). Each payload is a serialized tensorflow.Event
// (tensorflow/core/util/event.proto):
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first record carries file_version "brain.Event:2"; every later one a Summary of scalars. Scalars
// are `simple_value` (float32), as PyTorch's SummaryWriter, and so Hugging Face's TensorBoardCallback,
// write them.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trlhpc {

using TensorBoardScalars = std::vector<std::pair<std::string, double>>;  // (tag, value)

namespace tensorboard {
// The pieces of the format, exposed for tests.
std::string tfrecord(std::string_view payload);
std::string file_version_event(double wall_time);
std::string scalars_event(double wall_time, int64_t step, const TensorBoardScalars& scalars);
}  // namespace tensorboard

class TensorBoardWriter {
 public:
  // Creates `logging_dir` and a new event file in it (a resumed run adds a file, as TensorBoard expects).
  // UserError naming the folder when it cannot be written.
  explicit TensorBoardWriter(const std::string& logging_dir);

  // One event holding every scalar of `step`, flushed so TensorBoard sees it while the run goes on.
  void add_scalars(int64_t step, const TensorBoardScalars& scalars);
  const std::string& path() const { return path_; }

 private:
  void write_record(std::string_view payload);
  struct CloseFile {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, CloseFile> file_;
};

}  // namespace trlhpc
