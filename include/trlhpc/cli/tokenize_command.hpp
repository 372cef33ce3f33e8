#pragma once
// `trlhpc tokenize`: shows what training will see, before any GPU hour is spent (CONTRACT.md).
//   trlhpc tokenize --tokenizer DIR                       text lines from stdin -> ids and pieces
//   trlhpc tokenize --tokenizer DIR --dataset_name PATH   every dataset row, tokenized exactly as
//                   [--assistant_only_loss] [--completion_only_loss true|false] [--max_length N] ...
//                                                         `trlhpc sft` tokenizes it (RowTokenizer)
// One JSON line per row: {"input_ids", "tokens", "loss_mask"} plus "text" (the rendered chat template)
// for conversational rows, and with --chat "marked": the row with trained tokens wrapped in [[ ]].
// Runs on rank 0 only when launched under mpirun.
#include <iosfwd>
#include <string>
#include <vector>

namespace trlhpc {

class MpiEnvironment;

int run_tokenize_command(const std::vector<std::string>& args, MpiEnvironment& mpi, std::istream& in,
                         std::ostream& out);

}  // namespace trlhpc
