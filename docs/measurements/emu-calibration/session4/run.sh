#!/bin/bash
# usage: run.sh OUTDIR N...   (emu up / run / down per N; trap tears down)
export FABRICLAB_STORE=off
set -u
OUT=$1; shift
mkdir -p "$OUT"
trap 'fabriclab emu down >/dev/null 2>&1' EXIT
for N in "$@"; do
  fabriclab emu up --topology star --hosts "$N" --link ${LINK:-1Gbps} --format plain >/dev/null || exit 1
  echo "N=$N load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
  fabriclab emu run --timeout 500 --rank0-only -- sh -c \
    'fabriclab collectives bench --algo native --sizes ${SIZES:-64KB:64MB:x4} --iters 10 --warmup 2 --format plain > /tmp/emu2/emu_'"$N"'.rank$RANK.log' \
    > "$OUT/emu_$N.launcher.log" 2>&1
  echo "N=$N emu run rc=$? load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
  cp /tmp/emu2/emu_"$N".rank0.log "$OUT/emu_$N.log"
  fabriclab emu down >/dev/null
done
