#!/bin/sh
# A realistic results store for the report: quick real runs of the commands whose records the report
# draws (~5 min on 2 CPU cores). The browser test reads its export, tests/report/data/realistic_records.json.gz;
# the README's docs/report.png is shot from it (tests/report/screenshot.py).
# Usage: tests/report/build_store.sh STORE.db
set -e
STORE=${1:?usage: build_store.sh STORE.db}
LOGS=$(cd "$(dirname "$0")/../../examples/nccl-tests-a100" && pwd)
export FABRICLAB_STORE="$STORE"
TMP=$(mktemp -d)
f() { echo "+ fabriclab $*" >&2; python -m fabriclab "$@" --format plain > /dev/null; }
f calibrate nccl-tests "$LOGS"/nccl_1.log "$LOGS"/nccl_2.log "$LOGS"/nccl_4.log "$LOGS"/nccl_8.log "$LOGS"/nccl_16.log --out "$TMP/a100.json"
f calibrate nccl-tests "$LOGS"/nccl_2.log "$LOGS"/nccl_4.log --check "$LOGS"/nccl_8.log --out "$TMP/a24.json"
f simulate collective --cluster "$TMP/a100.json" --gpus 128 --sizes 32KB,256KB,1MB,4MB,16MB,64MB
f plan --cluster "$TMP/a100.json" --model resnet50 --gpus 64,256
f whatif
f whatif --cluster "$TMP/a100.json" --profile resnet50
f whatif reproduce
f validate published
f simulate sweep --preset fatness --hosts 128
f stencil simulate --ranks 64,256,1024,4096
echo "+ fabriclab run" >&2; python -m fabriclab run > /dev/null  # the main job (no options)
f collectives bench --np 2 --algo ring,butterfly,native --sizes 1KB:1MB --iters 3
f train --np 1 --steps 3 --warmup 1 --model resnet50 --image-size 32 --batch-size 8 --no-baseline
f train --np 2 --steps 3 --warmup 1 --model resnet50 --image-size 32 --batch-size 8
f train --np 1 --steps 3 --warmup 1 --replay resnet50 --dilation 10 --batch-size 16 --no-baseline
f train --np 2 --steps 3 --warmup 1 --replay resnet50 --dilation 10 --batch-size 32 --no-baseline
f bench overhead --model resnet50 --image-size 32 --batch-size 8 --steps 3 --warmup 1 --rounds 1
f bench train --modes allreduce:ring/backward,reduce:cb/none,reduce:cb/forward --np 2 --steps 3 --warmup 1 --model resnet50 --batch-size 8
f whatif llm --model llama3-70b --gpus 1024 --tp 8 --pp 4 --gbs 512 --seq 8192 --trace "$TMP/step.json"
f whatif llm --model mixtral-8x7b --gpus 64 --tp 2 --pp 2 --ep 4 --seq 4096 --recompute full
f plan --model resnet50 --gpus 64,256,512  # last: the newest plan (the summary's recommendation) compares fabrics
rm -rf "$TMP"
