#!/usr/bin/env bash
# Run 126 (session 19): backward on causal and sliding at 32K, the final code (uniform spans
# computed) against bd911d4 (spans always loaded from the tables) and 8dca83e (before).
L=/tmp/l; rm -rf $L; mkdir -p $L
OUT=$L/ab scripts/gpu/ab_checks.sh causal,sliding bd911d4 8dca83e > $L/ab.txt 2>&1; echo "ab exit $?"
cp $L/ab/ab.md $OUT/
grep -A3 "^|---" $L/ab/ab.md
