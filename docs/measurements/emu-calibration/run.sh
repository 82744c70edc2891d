#!/bin/bash
# Emulated star clusters of N hosts (1 rank per host, 1 Gbit/s links); Gloo's own allreduce (--algo native).
# Each rank writes its own stdout to a file (emu run prefixes lines with "[rank] " and appends
# "all N ranks exited 0", which the calibrate reader does not accept); rank 0's file is the log.
export FABRICLAB_STORE=off
set -u
trap 'fabriclab emu down' EXIT
for N in "$@"; do
  fabriclab emu up --topology star --hosts "$N" --link 1Gbps --format plain || exit 1
  fabriclab emu run --timeout 500 --rank0-only -- sh -c \
    'fabriclab collectives bench --algo native --sizes 64KB:64MB:x4 --iters 5 --warmup 1 --format plain > /tmp/emu_'"$N"'.rank$RANK.log' \
    > /tmp/emu_"$N".launcher.log 2>&1
  echo "N=$N emu run rc=$?"; cat /tmp/emu_"$N".launcher.log
  cp /tmp/emu_"$N".rank0.log /tmp/emu_"$N".log
  fabriclab emu down
done
