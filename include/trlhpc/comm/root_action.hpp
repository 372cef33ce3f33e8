#pragma once
// run_on_root: an action only one rank should take (file-system changes such as creating, renaming or
// deleting a checkpoint folder), with its outcome shared: every rank returns, or every rank throws the
// same error, so no rank continues into a collective the others will never reach.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace trlhpc {

class Communicator;

// Collective over `comm`: `text` of rank `root` on every rank.
void broadcast_text(Communicator& comm, std::string& text, int root = 0);

// Collective over `comm`: runs `action` on its rank 0, then broadcasts success or the error text. A
// UserError stays a UserError on every rank; any other exception becomes a RuntimeFailure.
void run_on_root(Communicator& comm, const std::function<void()>& action);

// The same for an action that answers `count` numbers (e.g. where rank 0 put things in a file): every
// rank returns them. The outcome and the numbers travel in one broadcast (one round trip; the error
// text follows only on failure).
std::vector<int64_t> run_on_root(Communicator& comm, size_t count, const std::function<std::vector<int64_t>()>& action);

}  // namespace trlhpc
