#pragma once
// run_on_root: an action only one rank should take (file-system changes such as creating, renaming or
// deleting a checkpoint folder), with its outcome shared: every rank returns, or every rank throws the
// same error, so no rank continues into a collective the others will never reach.
#include <functional>
#include <string>

namespace trlhpc {

class Communicator;

// Collective over `comm`: `text` of rank `root` on every rank.
void broadcast_text(Communicator& comm, std::string& text, int root = 0);

// Collective over `comm`: runs `action` on its rank 0, then broadcasts success or the error text. A
// UserError stays a UserError on every rank; any other exception becomes a RuntimeFailure.
void run_on_root(Communicator& comm, const std::function<void()>& action);

}  // namespace trlhpc
