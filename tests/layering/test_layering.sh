#!/usr/bin/env bash
# The layering checks fail the build on a forbidden arrow (cmake/areas.cmake). Probes built on demand
# (EXCLUDE_FROM_ALL) in this build tree:
#   forbidden: `model` code calling `train`, `model` code calling MPI, and `comm_backends` code
#              (src/comm/) calling `parallel` (the mesh): the link must fail, naming the symbol that
#              crosses the line;
#   allowed:   the same objects with the arrow granted (train's areas, MPI's library) must link, so the
#              failures above come from the layering and not from a broken probe.
set -u
BUILD=$1
CMAKE=${2:-cmake}
fail() { echo "FAIL: $*"; exit 1; }
build() { "$CMAKE" --build "$BUILD" --target "$1" 2>&1; }

for probe in train mpi; do
  out=$(build "layering_probe_model_calls_${probe}_forbidden") && fail "model -> $probe linked; the layering check let it through"
  case $probe in
    train) want="undefined reference to .trlhpc::training_flops_per_token" ;;
    mpi) want="undefined reference to .MPI_Barrier" ;;
  esac
  grep -q "$want" <<<"$out" || fail "model -> $probe failed, but not on the crossing symbol: $(tail -20 <<<"$out")"
  echo "ok: model -> $probe fails to link: $(grep -m1 -o "$want[^']*" <<<"$out")"
  out=$(build "layering_probe_model_calls_${probe}_allowed") || fail "control: model -> $probe with the arrow allowed did not link: $(tail -20 <<<"$out")"
  echo "ok: the control (arrow allowed) links"
done
out=$(build layering_probe_comm_calls_parallel_forbidden) && fail "comm_backends -> parallel linked; the layering check let it through"
want="undefined reference to .trlhpc::group_kind_name"
grep -q "$want" <<<"$out" || fail "comm_backends -> parallel failed, but not on the crossing symbol: $(tail -20 <<<"$out")"
echo "ok: comm_backends -> parallel fails to link: $(grep -m1 -o "$want[^']*" <<<"$out")"
out=$(build layering_probe_comm_calls_parallel_allowed) || fail "control: comm -> parallel with the arrow allowed did not link: $(tail -20 <<<"$out")"
echo "ok: the control (arrow allowed) links"
echo PASS
