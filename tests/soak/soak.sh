#!/usr/bin/env bash
# Soak (issue 30): many short tiny-chat runs at several rank counts, with the progress thread on, under
# a CPU hog, saving checkpoints, some stopped by SIGUSR1 (to one rank or all) or by kill -9 of a random
# rank at a random moment, each then resumed with --resume_from_checkpoint latest until it finishes.
# Counts, and fails (exit 1) on any of:
#   hang             a run past --hang_factor (10) x the median duration of an uninterrupted run at its
#                    rank count, and at least --hang_floor (60) s: killed with -9 and counted.
#                    A run past 3x the median is counted as "slow" and the ranks' stacks (gdb) and the
#                    load average go into the log; it may still finish. On a shared machine whose load
#                    swings, 3x is crossed by runs that are merely slow (issue 30's original report: a
#                    start line that sat 120 s under heavy load, 9 s otherwise), hence both counts.
#   lost checkpoint  after a stop, 'latest' names a folder that is not there, the run that resumes does
#                    not start from the newest complete checkpoint (checkpoint-N with a manifest.json),
#                    or a preempted run names a checkpoint that is not there;
#   bad exit code    a code outside the documented set for what was done to the run: 0 for a run left
#                    alone; 3 (or 0, finished first) after SIGUSR1; after kill -9, 2 (the ranks agreed
#                    on the failure), 137 (mpirun reports the rank killed by signal 9) or 0 (finished
#                    first); 1 never (nothing here is bad input).
#
# usage: tests/soak/soak.sh TRLHPC [--minutes M | --runs N] [--np "2 4 8"] [--hogs H] [--seed S]
#                           [--max_steps K] [--keep DIR] [--mpirun MPIRUN] [--hang_factor F] [--hang_floor S]
#   --minutes M  start new episodes for M minutes (default 5); --runs N: N episodes instead
#   --hogs H     busy-looping processes competing with the ranks (default: the number of cores)
#   --keep DIR   keep the logs of every failed episode there (default: printed, then removed)
# Every run's command line is in the episode log, so a failure can be replayed by hand.
set -u
TRLHPC=$1
shift
MINUTES=5 RUNS=0 NPS="2 4 8" HOGS=$(nproc) SEED=$$ MAX_STEPS=6 KEEP="" MPIRUN=mpirun HANG_FACTOR=10 HANG_FLOOR=60
while [ $# -gt 0 ]; do
  case $1 in
    --minutes) MINUTES=$2 ;; --runs) RUNS=$2 ;; --np) NPS=$2 ;; --hogs) HOGS=$2 ;; --seed) SEED=$2 ;;
    --max_steps) MAX_STEPS=$2 ;; --keep) KEEP=$2 ;; --mpirun) MPIRUN=$2 ;;
    --hang_factor) HANG_FACTOR=$2 ;; --hang_floor) HANG_FLOOR=$2 ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
RANDOM=$SEED
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
HOG_PIDS=()
cleanup() {
  for pid in "${HOG_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
for ((i = 0; i < HOGS; i++)); do (while :; do :; done) & HOG_PIDS+=($!); done

TINY=(--model_config "$ROOT/examples/tiny-chat/config.json" --tokenizer "$ROOT/examples/tiny-chat"
  --dataset_name "$ROOT/examples/tiny-chat/train.jsonl" --max_length 128 --packing --per_device_train_batch_size 2
  --logging_steps 1 --comm_progress thread --max_steps "$MAX_STEPS" --save_steps 2 --peak_flops 1e12
  --dataset_cache_dir "$WORK/dataset_cache")  # --peak_flops: no GEMM timing at start (3 s under the hog)

hangs=0 slow=0 slow_finished=0 lost=0 bad_exits=0 episodes=0 runs=0 usr1=0 kills=0 resumes=0
declare -A durations  # np -> space-separated durations (s) of runs left alone that ran from step 0
failed_episode=0 episode_slow=0

now() { date +%s.%N; }
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR + 1) / 2)] : 0)}'; }

# The pids of the ranks started by launcher `pid`: its descendants running $TRLHPC (the kernel keeps the
# first 15 characters of a process name).
RANK_NAME=$(basename "$TRLHPC" | cut -c1-15)
rank_pids() {
  ps -e -o pid=,ppid=,comm= | awk -v root="$1" -v rank_name="$RANK_NAME" '
    { parent[$1] = $2; name[$1] = $3 }
    END { for (p in parent) { q = p; while (q in parent && q != root && q > 1) q = parent[q];
                              if (q == root && name[p] == rank_name) print p } }'
}

note() { echo "$*" >>"$EPISODE_LOG"; }
problem() {  # KIND MESSAGE: count it and keep the episode
  case $1 in hang) hangs=$((hangs + 1)) ;; lost) lost=$((lost + 1)) ;; exit) bad_exits=$((bad_exits + 1)) ;; esac
  failed_episode=1
  echo "SOAK $1: $2 (episode $episodes, np $NP)"
  note "SOAK $1: $2"
}

# The newest complete checkpoint's step in $OUT (0: none).
newest_checkpoint() {
  local best=0 d n
  for d in "$OUT"/checkpoint-*; do
    n=${d##*/checkpoint-}
    [[ $n =~ ^[0-9]+$ ]] && [ -f "$d/manifest.json" ] && [ "$n" -gt "$best" ] && best=$n
  done
  echo "$best"
}

# run_once FAULT ARGS...: one mpirun of trlhpc sft; FAULT is none, usr1-one, usr1-all or kill9. Sets RC,
# ELAPSED, FAULT_SENT (1 when the fault reached a rank before the run ended).
run_once() {
  local fault=$1
  shift
  local log="$WORK/run.log" limit median_s
  median_s=$(median "${durations[$NP]:-}")
  limit=$(awk -v m="$median_s" 'BEGIN { print (m > 0 ? 3 * m : 600) }')
  local hard_limit
  hard_limit=$(awk -v m="$median_s" -v f="$HANG_FACTOR" -v floor="$HANG_FLOOR" 'BEGIN { h = f * m; print (m > 0 ? (h > floor ? h : floor) : 600) }')
  # When the fault strikes: uniformly within the median run time, after the ranks are up.
  local delay
  delay=$(awk -v m="$median_s" -v r=$RANDOM 'BEGIN { printf "%.2f", (m > 0 ? m : 10) * r / 32768 }')
  note "run np $NP fault $fault (at +${delay}s once running) slow past ${limit}s, hung past ${hard_limit}s: $MPIRUN --oversubscribe -np $NP $TRLHPC sft $*"
  runs=$((runs + 1))
  local start
  start=$(now)
  setsid "$MPIRUN" --oversubscribe -np "$NP" "$TRLHPC" sft "$@" >"$log" 2>&1 &
  local pid=$! fault_at="" ranks was_slow=0
  FAULT_SENT=0
  while kill -0 "$pid" 2>/dev/null; do
    local t
    t=$(awk -v s="$start" -v n="$(now)" 'BEGIN { print n - s }')
    if [ "$was_slow" = 0 ] && awk -v t="$t" -v l="$limit" 'BEGIN { exit !(t > l) }'; then
      # Past 3x the median: where each rank is (a slow run and a hung one look alike from outside) and
      # how loaded the machine is; then it gets until the hang limit to finish.
      was_slow=1 episode_slow=1
      slow=$((slow + 1))
      echo "SOAK slow: run past ${limit}s (3x the median ${median_s}s at np $NP), load $(cut -d' ' -f1-3 /proc/loadavg) (episode $episodes)"
      note "SOAK slow: past ${limit}s, load average $(cut -d' ' -f1-3 /proc/loadavg); the ranks' stacks:"
      for r in $(rank_pids "$pid"); do
        note "rank process $r:"
        command -v gdb >/dev/null &&
          timeout 60 gdb -batch -p "$r" -ex "thread apply all bt" 2>/dev/null | grep -E "^(Thread|#)" | cut -c1-200 >>"$EPISODE_LOG"
      done
    fi
    if awk -v t="$t" -v l="$hard_limit" 'BEGIN { exit !(t > l) }'; then
      kill -9 -- -"$pid" 2>/dev/null
      for r in $(rank_pids "$pid"); do kill -9 "$r" 2>/dev/null; done
      wait "$pid" 2>/dev/null
      cat "$log" >>"$EPISODE_LOG"
      problem hang "run past ${hard_limit}s (${HANG_FACTOR}x the median ${median_s}s at np $NP, at least ${HANG_FLOOR}s), killed"
      RC=hang
      return
    fi
    if [ "$fault" != none ] && [ "$FAULT_SENT" = 0 ]; then
      # "Running": the ranks have printed their first line (the signal handlers are installed by then).
      if [ -z "$fault_at" ] && [ -s "$log" ]; then fault_at=$(awk -v t="$t" -v d="$delay" 'BEGIN { print t + d }'); fi
      if [ -n "$fault_at" ] && awk -v t="$t" -v f="$fault_at" 'BEGIN { exit !(t >= f) }'; then
        mapfile -t ranks < <(rank_pids "$pid")
        if [ ${#ranks[@]} -gt 0 ]; then
          local victim=${ranks[$((RANDOM % ${#ranks[@]}))]}
          case $fault in
            usr1-one) kill -USR1 "$victim" 2>/dev/null && FAULT_SENT=1 ;;
            usr1-all) kill -USR1 "${ranks[@]}" 2>/dev/null && FAULT_SENT=1 ;;
            kill9) kill -9 "$victim" 2>/dev/null && FAULT_SENT=1 ;;
          esac
          note "sent $fault to pid $victim at ${t}s"
        fi
      fi
    fi
    sleep 0.1
  done
  wait "$pid"
  RC=$?
  ELAPSED=$(awk -v s="$start" -v n="$(now)" 'BEGIN { printf "%.2f", n - s }')
  cat "$log" >>"$EPISODE_LOG"
  note "exit $RC after ${ELAPSED}s"
  if [ "$was_slow" = 1 ]; then
    slow_finished=$((slow_finished + 1))
    echo "SOAK slow run ended: exit $RC after ${ELAPSED}s (episode $episodes)"
  fi
}

# One episode: a fresh run, then resumes until a run finishes (at most 4 runs; the last is left alone).
episode() {
  episodes=$((episodes + 1))
  failed_episode=0 episode_slow=0
  OUT="$WORK/out"
  rm -rf "$OUT"
  EPISODE_LOG="$WORK/episode.log"
  : >"$EPISODE_LOG"
  local extra=()
  [ $((RANDOM % 2)) = 0 ] && extra+=(--async_save)
  local faults=(none usr1-one usr1-all kill9) segment=0 resume=() fault
  while :; do
    fault=none
    if [ -n "${durations[$NP]:-}" ] && [ $segment -lt 3 ]; then fault=${faults[$((RANDOM % 4))]}; fi
    local before_step
    before_step=$(newest_checkpoint)
    run_once "$fault" "${TINY[@]}" "${extra[@]}" --output_dir "$OUT" "${resume[@]}"
    [ "$RC" = hang ] && return
    local log="$WORK/run.log"
    if [ ${#resume[@]} -gt 0 ]; then
      resumes=$((resumes + 1))
      # A fault may stop the resume before it loads; once it has loaded (or finished), it must have
      # started from the newest complete checkpoint.
      if [ "$before_step" -gt 0 ] && { grep -q "resumed from" "$log" || [ "$RC" = 0 ]; } &&
        ! grep -q "resumed from $OUT/checkpoint-$before_step after step $before_step " "$log"; then
        problem lost "the resume did not start from the newest complete checkpoint-$before_step: $(grep -m1 -E 'resumed from|error' "$log")"
      fi
    fi
    case $fault in usr1-*) [ "$FAULT_SENT" = 1 ] && usr1=$((usr1 + 1)) ;; kill9) [ "$FAULT_SENT" = 1 ] && kills=$((kills + 1)) ;; esac
    local allowed="0"
    if [ "$FAULT_SENT" = 1 ]; then
      case $fault in usr1-*) allowed="0 3" ;; kill9) allowed="0 2 137" ;; esac
    fi
    if [[ " $allowed " != *" $RC "* ]]; then
      problem exit "exit $RC after $fault (documented: $allowed): $(grep -m1 -E 'error|failure' "$log")"
      return
    fi
    if [ "$RC" = 0 ]; then
      [ "$fault" = none ] && [ $segment = 0 ] && durations[$NP]="${durations[$NP]:-} $ELAPSED"
      if [ ! -f "$OUT/model.safetensors" ] || ! grep -q "\"step\":$MAX_STEPS[,}]" "$OUT/metrics.jsonl"; then
        problem lost "exit 0 without the model or step $MAX_STEPS in metrics.jsonl"
      fi
      return
    fi
    if [ "$RC" = 3 ]; then
      local named
      named=$(grep -m1 -oE "checkpoint $OUT/checkpoint-[0-9]+" "$log" | sed 's/^checkpoint //')
      if [ -n "$named" ] && [ ! -f "$named/manifest.json" ]; then problem lost "exit 3 names $named, which is not there"; fi
    fi
    if [ -f "$OUT/latest" ]; then
      local latest
      latest=$(tr -d '\n' <"$OUT/latest")
      [ -f "$OUT/$latest/manifest.json" ] || problem lost "'latest' names $latest, which is not a complete checkpoint"
    fi
    # latest when a checkpoint was written; no checkpoint yet (stopped before step 2): the same command.
    if [ "$(newest_checkpoint)" -gt 0 ]; then resume=(--resume_from_checkpoint latest); else resume=(); fi
    segment=$((segment + 1))
  done
}

keep_if_failed() {
  [ "$failed_episode" = 1 ] || [ "$episode_slow" = 1 ] || return 0
  if [ -n "$KEEP" ]; then
    mkdir -p "$KEEP"
    cp "$EPISODE_LOG" "$KEEP/episode-$episodes-np$NP.log"
  else
    sed 's/^/    /' "$EPISODE_LOG" | tail -60
  fi
}

read -r -a NP_LIST <<<"$NPS"
echo "soak: np {$NPS}, $HOGS CPU hogs, seed $SEED, $( [ "$RUNS" -gt 0 ] && echo "$RUNS episodes" || echo "$MINUTES minutes")"
deadline=$(awk -v s="$(now)" -v m="$MINUTES" 'BEGIN { printf "%.3f", s + 60 * m }')  # print would round to 6 digits
while :; do
  if [ "$RUNS" -gt 0 ]; then [ "$episodes" -ge "$RUNS" ] && break
  else awk -v n="$(now)" -v d="$deadline" 'BEGIN { exit !(n >= d) }' && break; fi
  # Round robin over the rank counts, so each gets its median (a fault-free first run) early.
  NP=${NP_LIST[$((episodes % ${#NP_LIST[@]}))]}
  episode
  keep_if_failed
done
summary="soak: $episodes episodes, $runs runs ($resumes resumes), SIGUSR1 $usr1, kill -9 $kills; past 3x median $slow ($slow_finished of them finished), hangs $hangs, lost checkpoints $lost, bad exit codes $bad_exits; median s:"
for np in "${NP_LIST[@]}"; do summary+=" np$np $(median "${durations[$np]:-}") ($(wc -w <<<"${durations[$np]:-}") runs)"; done
echo "$summary"
[ $((hangs + lost + bad_exits)) -eq 0 ]
