#!/usr/bin/env bash
# The main job on a bundled example: set up, build the compilemask tool, then show, compile (and
# inspect the descriptor written) and run examples/shared_prefix.mask (a 1024-token prompt and four 768-token responses, N = 4096).
# Writes build/example/shared_prefix.png and build/example/shared_prefix.descriptor (the descriptor).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
cmake --preset dev
cmake --build --preset dev --target compilemask_cli

cli=build/dev/tools/cli/compilemask
mask=examples/shared_prefix.mask
out=build/example
mkdir -p "$out"
params=(-p prompt=0:1024 -p "responses=1024,1792,2560,3328,4096" -n 4096)

set -x
"$cli" check "$mask"
"$cli" show "$mask" "${params[@]}" --png "$out/shared_prefix.png"
"$cli" compile "$mask" "${params[@]}" --emit stats --estimate
"$cli" compile "$mask" "${params[@]}" --emit descriptor -o "$out/shared_prefix.descriptor"
"$cli" inspect "$out/shared_prefix.descriptor"
"$cli" run "$mask" "${params[@]}" --heads 4 --heads-kv 2 --dim 64 --backward
