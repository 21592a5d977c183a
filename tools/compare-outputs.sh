#!/usr/bin/env bash
# Byte-for-byte comparison of what two parasim builds print, for refactors
# that must not change behaviour. Records, for every scenario under
# scenarios/ (recursively), `run` in json and table form (and `sweep` for
# files with a sweep: block), plus `validate` of the published dataset in
# json and the scenario files it writes (--scenarios), then compares.
#
#   tools/compare-outputs.sh record BIN DIR   record BIN's outputs into DIR
#   tools/compare-outputs.sh BIN_A BIN_B      record both (temp dirs), compare
#   tools/compare-outputs.sh DIR_A DIR_B      compare two recorded dirs
#
# Run from the repository root. Exit 0 when identical, 1 when anything
# differs (each difference is named), 2 on misuse.
set -euo pipefail

dataset=../shared/validation/published.yaml

record() {
    local bin=$1 out=$2
    mkdir -p "$out"
    local f name
    while IFS= read -r f; do
        name=$(echo "${f#scenarios/}" | tr / _)
        # A run that refuses (exit != 0) is an output too: keep its stderr and status.
        "$bin" run "$f" --format json >"$out/$name.run.json" 2>"$out/$name.run.err" || echo "rc=$?" >>"$out/$name.run.err"
        "$bin" run "$f" >"$out/$name.run.txt" 2>&1 || echo "rc=$?" >>"$out/$name.run.txt"
        if grep -q '^sweep:' "$f"; then
            "$bin" sweep "$f" --format json --threads 2 >"$out/$name.sweep.json" 2>&1 || echo "rc=$?" >>"$out/$name.sweep.json"
        fi
    done < <(find scenarios -name '*.yaml' | sort)
    if [ -f "$dataset" ]; then
        mkdir -p "$out/validate-scenarios"
        "$bin" validate "$dataset" --format json --scenarios "$out/validate-scenarios" >"$out/validate.json" 2>&1 \
            || echo "rc=$?" >>"$out/validate.json"
    fi
}

compare() {
    if diff -r "$1" "$2" >/dev/null; then
        echo "identical: $(find "$1" -type f | wc -l) files"
        return 0
    fi
    echo "DIFFERENT:"
    diff -rq "$1" "$2" || true
    return 1
}

case "${1:-}" in
    record)
        [ $# -eq 3 ] || { echo "usage: $0 record BIN DIR" >&2; exit 2; }
        record "$2" "$3"
        ;;
    *)
        [ $# -eq 2 ] || { echo "usage: $0 BIN_A BIN_B | DIR_A DIR_B | record BIN DIR" >&2; exit 2; }
        if [ -d "$1" ] && [ -d "$2" ]; then
            compare "$1" "$2"
        else
            tmp=$(mktemp -d)
            trap 'rm -rf "$tmp"' EXIT
            record "$1" "$tmp/a"
            record "$2" "$tmp/b"
            compare "$tmp/a" "$tmp/b"
        fi
        ;;
esac
