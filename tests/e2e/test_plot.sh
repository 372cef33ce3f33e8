#!/usr/bin/env bash
# `trlhpc plot`: from a real metrics.jsonl (tests/fixtures/metrics_tiny_chat.jsonl, 300 steps of the
# bundled tiny-chat job on 2 ranks, with evals) it writes a PNG: the file starts with the PNG signature
# and its IHDR chunk (CRC-checked) holds the requested width and height. A torn last line is skipped; a
# broken line elsewhere, a missing file and a missing gnuplot are exit 1 with a message saying what to
# do. `trlhpc sft --plot` leaves OUTPUT_DIR/loss.png, and without gnuplot only warns (exit 0). Without
# gnuplot installed the drawing checks are reported as SKIPPED by ctest (exit 77).
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
FIXTURE=$ROOT/tests/fixtures/metrics_tiny_chat.jsonl

png_is() {  # png_is FILE WIDTH HEIGHT
  python3 - "$@" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
ok = data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
if ok:
    (length,) = struct.unpack(">I", data[8:12])
    width, height = struct.unpack(">II", data[16:24])
    (crc,) = struct.unpack(">I", data[16 + length:20 + length])
    ok = length == 13 and (width, height) == (int(sys.argv[2]), int(sys.argv[3])) and crc == zlib.crc32(data[12:16 + length])
    print(f"{sys.argv[1]}: PNG {width}x{height}, {len(data)} bytes")
else:
    print(f"{sys.argv[1]}: not a PNG")
sys.exit(0 if ok else 1)
PY
}

expect_error() {  # expect_error PATTERN COMMAND...
  local pattern=$1
  shift
  "$@" > "$WORK/err.log" 2>&1
  local rc=$?
  grep -q -- "$pattern" "$WORK/err.log"
  local found=$?
  [ $rc -eq 1 ] && [ $found -eq 0 ]
  local ok=$?
  [ $ok -ne 0 ] && { echo "expected exit 1 and '$pattern', got exit $rc:"; cat "$WORK/err.log"; }
  check "error $pattern" $ok
}

# Without gnuplot on PATH: a clear error (trlhpc itself is run by its full path; OpenMPI's singleton
# start-up looks for an ssh/rsh agent on PATH, which it does not use: point it at /bin/false).
expect_error "needs gnuplot" env PATH=/nonexistent OMPI_MCA_plm_rsh_agent=/bin/false "$TRLHPC" plot "$FIXTURE" -o "$WORK/none.png"
expect_error "cannot read" "$TRLHPC" plot "$WORK/missing.jsonl" -o "$WORK/x.png"
{ head -n 3 "$FIXTURE"; echo "not json"; tail -n 2 "$FIXTURE"; } > "$WORK/broken.jsonl"
expect_error "broken.jsonl line 4: not a JSON object" "$TRLHPC" plot "$WORK/broken.jsonl" -o "$WORK/x.png"
expect_error "-o FILE.png is required" "$TRLHPC" plot "$FIXTURE"

if ! command -v gnuplot > /dev/null; then
  e2e_end || exit 1
  skip "gnuplot is not installed (Debian: apt-get install gnuplot-nox), so nothing could be drawn"
fi
"$TRLHPC" plot "$FIXTURE" -o "$WORK/loss.png" && png_is "$WORK/loss.png" 900 600
check "default size" $?
"$TRLHPC" plot "$FIXTURE" -o "$WORK/it's small.png" --width 320 --height 200 --title "a 'quoted' title" \
  && png_is "$WORK/it's small.png" 320 200
check "size, quotes in names" $?
{ cat "$FIXTURE"; printf '{"step": 301, "loss": 1.'; } > "$WORK/torn.jsonl"
"$TRLHPC" plot "$WORK/torn.jsonl" -o "$WORK/torn.png" && png_is "$WORK/torn.png" 900 600
check "torn last line" $?
SFT=(sft --config "$ROOT/examples/tiny-chat/sft.yaml" --max_steps 3 --logging_steps 1 --max_length 128
     --dataset_cache_dir none --plot)
(cd "$ROOT" && OMP_NUM_THREADS=1 "$TRLHPC" "${SFT[@]}" --output_dir "$WORK/run" > "$WORK/run.log" 2>&1) \
  && grep -q "plotted .*loss.png" "$WORK/run.log" && png_is "$WORK/run/loss.png" 900 600
check "sft --plot" $?
(cd "$ROOT" && env PATH=/nonexistent OMPI_MCA_plm_rsh_agent=/bin/false OMP_NUM_THREADS=1 "$TRLHPC" "${SFT[@]}" \
  --output_dir "$WORK/run2" > "$WORK/run2.log" 2>&1) && grep -q "warning: --plot: trlhpc plot needs gnuplot" "$WORK/run2.log" \
  && [ -f "$WORK/run2/model.safetensors" ]
ok=$?
[ $ok -ne 0 ] && tail -5 "$WORK/run2.log"
check "sft --plot without gnuplot: a warning" $ok
e2e_end
