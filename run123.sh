#!/usr/bin/env bash
# Run 124 (session 19): tiles restarted at block boundaries (descriptor v5): forward and
# backward checks, sanitizers, A/B against 8dca83e, forward + backward of hstu and doc_causal.
L=/tmp/l; rm -rf $L; mkdir -p $L
OUT=$L/f scripts/gpu/fwd_checks.sh build test sanitize > $L/f.txt 2>&1; echo "fwd exit $?"
OUT=$L/b scripts/gpu/bwd_checks.sh build test sanitize > $L/b.txt 2>&1; echo "bwd exit $?"
BENCH_LENS=32768,4096 OUT=$L/ab scripts/gpu/ab_checks.sh hstu,doc_causal,causal,sliding 8dca83e > $L/ab.txt 2>&1; echo "ab exit $?"
OUT=$L/bb BENCH_LENS=32768 BENCH_MASKS=hstu,doc_causal BENCH_BUDGET=60 scripts/gpu/bwd_checks.sh bench > $L/bb.txt 2>&1; echo "bench exit $?"
cp $L/f/summary.txt $OUT/fwd_summary.txt; cp $L/b/bwd_summary.txt $OUT/; cp $L/ab/ab.md $OUT/; cp $L/bb/bench_bwd.md $OUT/
{ grep -hE "FAIL|Failure|error|Race|mismatch" $L/f/*.log $L/b/*.log | sort | uniq -c | sort -rn | head -40; } > $OUT/fails.txt
tail -3 $L/ab.txt
