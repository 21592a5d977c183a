#!/usr/bin/env bash
# Applies .clang-format (clang-format 14, as CI's clang) to C++ sources.
#
#   tools/format.sh                 format every tracked .cpp/.h
#   tools/format.sh PATH...         format these files, or the tracked
#                                   .cpp/.h files under these folders
#   tools/format.sh --check [PATH...]  change nothing; list the files that
#                                   would change, exit 1 if any
#
# Run from the repository root. The whole-tree run is meant to happen once,
# as its own commit (mechanical, so review reads it as such): after the open
# branches are merged, since it touches nearly every file. Until then,
# format the files you own.
set -euo pipefail

cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
    for c in clang-format-14 clang-format; do
        if command -v "$c" >/dev/null; then cf=$c; break; fi
    done
fi
[ -n "$cf" ] || { echo "format.sh: clang-format not found (set CLANG_FORMAT)" >&2; exit 2; }

check=false
if [ "${1:-}" = "--check" ]; then check=true; shift; fi

mapfile -t files < <(git ls-files -- "${@:-.}" | grep -E '\.(cpp|h)$' || true)
[ ${#files[@]} -gt 0 ] || { echo "format.sh: no C++ files under: ${*:-.}" >&2; exit 2; }

if $check; then
    changed=0
    for f in "${files[@]}"; do
        if ! "$cf" --style=file "$f" | cmp -s - "$f"; then echo "$f"; changed=1; fi
    done
    exit $changed
fi
"$cf" --style=file -i "${files[@]}"
