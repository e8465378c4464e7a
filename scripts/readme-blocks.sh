#!/usr/bin/env bash
# readme-blocks.sh — run the README's shell blocks that are marked for CI,
# so that the README cannot rot.
#
# A fenced ```sh block whose opening fence directly follows a line
# `<!-- ci -->` is run; other blocks are documentation only. The marked
# blocks run in order, in ONE bash process (so a block may start a
# background server that a later block uses and stops), from the
# repository root, with `set -euo pipefail`, and with a freshly built
# rlprobe first on PATH. Background jobs still running at the end are
# killed, and the files the blocks left at the repository's top level
# (record files, logs) are removed. Keep marked blocks quick and on
# loopback.
#
# Usage: scripts/readme-blocks.sh [README.md]        (-l: list the blocks only)
set -euo pipefail

cd "$(dirname "$0")/.."
list=false
if [ "${1:-}" = "-l" ]; then list=true; shift; fi
readme=${1:-README.md}

work=$(mktemp -d)
# Top-level files that are not in git, before the blocks run.
untracked() { git ls-files --others --directory 2>/dev/null | grep -v / | sort || true; }
untracked > "$work/before"
cleanup() {
	untracked | comm -13 "$work/before" - | while IFS= read -r f; do rm -f -- "$f"; done
	rm -rf "$work"
}
trap cleanup EXIT

# Extract the marked blocks into one script, each announced by its line.
awk -v out="$work/blocks.sh" -v name="$readme" '
	/^<!-- ci -->[[:space:]]*$/ { marked = NR; next }
	/^```(sh|bash|shell)[[:space:]]*$/ && marked == NR - 1 && !inblock {
		inblock = 1; n++
		print "printf \"\\n== " name ":" NR + 1 " (block " n ")\\n\"" > out
		next
	}
	/^```/ && inblock { inblock = 0; next }
	inblock { print > out; next }
	END { if (n == 0) exit 3; print n > (out ".count") }
' "$readme" || { echo "readme-blocks: no <!-- ci --> blocks in $readme" >&2; exit 1; }

if $list; then cat "$work/blocks.sh"; exit 0; fi

echo "readme-blocks: building rlprobe"
mkdir -p "$work/bin"
go build -o "$work/bin/rlprobe" ./cmd/rlprobe

{
	echo 'set -euo pipefail'
	# Stop whatever a failing block left running in the background.
	echo 'trap '"'"'kill $(jobs -p) 2>/dev/null || true'"'"' EXIT'
	cat "$work/blocks.sh"
	echo 'printf "\nreadme-blocks: every block passed\n"'
} > "$work/run.sh"

start=$(date +%s)
PATH="$work/bin:$PATH" timeout 300 bash "$work/run.sh"
echo "readme-blocks: $(cat "$work/blocks.sh.count") blocks in $(( $(date +%s) - start ))s"
