#!/usr/bin/env bash
# Run 127 (session 19): the backward reading the tile tables always: build and backward checks.
L=/tmp/l; rm -rf $L; mkdir -p $L
OUT=$L/b scripts/gpu/bwd_checks.sh build test > $L/b.txt 2>&1; echo "bwd exit $?"
grep -v "ptxas\|bytes stack" $L/b/bwd_summary.txt | grep -v "^    "
