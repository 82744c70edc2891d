#!/bin/sh
# A store of LLM work as a new user makes it after the README's LLM commands (~1 min on 2 CPU cores):
# 4 LLM plans, 8 `whatif llm` steps (one configuration run twice), 3 collective predictions. Its export,
# tests/report/data/llm_records.json.gz, is what the report's LLM browser test reads.
# Usage: tests/report/build_llm_store.sh STORE.db
set -e
STORE=$(realpath "${1:?usage: build_llm_store.sh STORE.db}")
export FABRICLAB_STORE="$STORE"
f() { echo "+ fabriclab $*" >&2; python -m fabriclab "$@" > /dev/null; }
f simulate collective --cluster dgx-h100 --gpus 1024 --collective allreduce --sizes 1MB,64MB,1GB
f simulate collective --cluster dgx-h100 --gpus 1024 --collective allgather --sizes 1MB,64MB,1GB
f simulate collective --cluster hgx-b200 --gpus 256 --collective alltoall --sizes 1MB,64MB
f whatif llm --model llama3-8b --gpus 64 --tp 2
f whatif llm --model llama3-70b --gpus 1024 --tp 8 --pp 4
f whatif llm --model llama3-70b --gpus 1024 --tp 8 --pp 4 --cluster hgx-h200
f whatif llm --model llama3-70b --gpus 1024 --tp 8 --pp 4  # the same configuration again: listed, not drawn
f whatif llm --model llama3-70b --gpus 1024 --tp 8 --pp 8 --cp 2
f whatif llm --model mixtral-8x7b --gpus 64 --tp 2 --pp 2 --ep 4 --seq 4096 --recompute full
f whatif llm --model mixtral-8x7b --gpus 128 --tp 2 --pp 2 --ep 8 --seq 4096 --recompute full --cluster hgx-b200
f whatif llm --model llama3-405b --gpus 2048 --tp 8 --pp 8 --cp 2 --gbs 512 --trace step.json
f plan --model llama3-8b --gpus 256 --clusters dgx-h100,hgx-h200
f plan --model mixtral-8x7b --gpus 512 --clusters dgx-h100 --nic-rates 400Gbps,800Gbps
f plan --model llama3-70b --gpus 1024,4096 --clusters dgx-h100 --nic-rates 400Gbps,800Gbps --fabrics rail,fat-tree
f plan --model llama3-70b --gpus 1024,4096 --clusters dgx-h100,hgx-h200,hgx-b200  # last: the newest plan answers the Summary
rm -f step.json
