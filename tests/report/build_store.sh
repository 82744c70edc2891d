#!/bin/sh
# A realistic results store for the report's browser test and the README screenshot: quick real runs of
# the commands whose records the report draws. Usage: tests/report/build_store.sh STORE.db  (~3 min, CPU)
set -e
STORE=${1:?usage: build_store.sh STORE.db}
LOGS=$(cd "$(dirname "$0")/../../examples/nccl-tests-a100" && pwd)
export FABRICLAB_STORE="$STORE"
TMP=$(mktemp -d)
f() { echo "+ fabriclab $*" >&2; python -m fabriclab "$@" --format plain > /dev/null; }
f calibrate nccl-tests "$LOGS"/nccl_1.log "$LOGS"/nccl_2.log "$LOGS"/nccl_4.log "$LOGS"/nccl_8.log "$LOGS"/nccl_16.log --out "$TMP/a100.json"
f plan --model resnet50 --gpus 64,256,512
f plan --cluster "$TMP/a100.json" --model resnet50 --gpus 64,256
f whatif
f whatif reproduce
f validate published
f simulate sweep --preset fatness --hosts 128
f stencil simulate --ranks 64,256,1024,4096
f collectives bench --np 2 --sizes 1KB:1MB --iters 3
f train --np 2 --steps 3 --warmup 1 --model resnet50 --image-size 32 --batch-size 8
f train --np 2 --steps 3 --warmup 1 --replay resnet50 --dilation 10
rm -rf "$TMP"
