#!/usr/bin/env bash
# Rewrites the table of docs/guide/trl-arguments.md from `trlhpc sft --help_trl_fields` (the table of
# src/cli/trl_fields_table.cpp); unit.test_trl_fields fails until the page matches the table.
#   scripts/update-trl-arguments-doc.sh [build/trlhpc]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRLHPC=${1:-$ROOT/build/trlhpc}
TABLE=$(mktemp)
trap 'rm -f "$TABLE"' EXIT
"$TRLHPC" sft --help_trl_fields > "$TABLE"
python3 - "$ROOT/docs/guide/trl-arguments.md" "$TABLE" <<'PY'
import sys
page, table = sys.argv[1], open(sys.argv[2]).read()
text = open(page).read()
begin, end = "<!-- trl-fields-table begin -->\n", "<!-- trl-fields-table end -->"
i, j = text.index(begin) + len(begin), text.index(end)
open(page, "w").write(text[:i] + table + text[j:])
PY
