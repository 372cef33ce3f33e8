// Layering probe (tests/layering/test_layering.sh): code placed in the `comm_backends` area (src/comm/:
// communicators, watchdog) that calls into `parallel` (the mesh), an arrow the architecture forbids:
// communicators know nothing of meshes, models or strategies.
#include "trlhpc/parallel/mesh/mesh.hpp"

namespace trlhpc::layering_probe {
const char* communicator_asks_mesh() { return group_kind_name(GroupKind::Tp); }
}  // namespace trlhpc::layering_probe
