#!/bin/bash
# memory-run.sh: issue 15's memory target, each broker in its own process.
# Three tide serve processes (ports 19201-19223, data under $DATA), 10 GiB
# of 1 KiB values produced in four steps of 2.5 GiB (3 partitions, RF 3,
# acks=all), then the backlog read back once from the start; each
# broker's VmRSS and VmHWM (/proc/PID/status), Go heap in use (its
# metrics) and data directory size sampled every 3 s into
# $OUT/mem-samples.txt, with a MARK line at each step. RF 3 writes 30 GiB:
# check the free space first. The data directory is removed at the end.
# docs/benchmarks.md, Issue 15's targets, has the figures.
#
#   go build -o /tmp/measure-tide ./cmd/tide && bash docs/measure/memory-run.sh
set -u
TIDE=${TIDE:-/tmp/measure-tide}
OUT=${OUT:-/tmp/measure/mem}
DATA=${DATA:-/tmp/measure/data}
mkdir -p $OUT $DATA
VOTERS=1@127.0.0.1:19201,2@127.0.0.1:19202,3@127.0.0.1:19203
LISTENERS=1@127.0.0.1:19211,2@127.0.0.1:19212,3@127.0.0.1:19213
BOOT=127.0.0.1:19211,127.0.0.1:19212,127.0.0.1:19213
pids=()
for id in 1 2 3; do
  $TIDE serve --id $id --controllers $VOTERS --kafka-listeners $LISTENERS --data-dir $DATA/$id \
    --metrics-listen 127.0.0.1:1922$id --default-replication-factor 3 --log-level warn > $OUT/serve-$id.log 2>&1 &
  pids+=($!)
done
echo "${pids[@]}" > $OUT/pids
mark() { echo "MARK $(date -u +%T) $*" >> $OUT/mem-samples.txt; }
sample() {
  for i in 0 1 2; do
    pid=${pids[$i]}; id=$((i+1))
    rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status 2>/dev/null)
    hwm=$(awk '/VmHWM/{print $2}' /proc/$pid/status 2>/dev/null)
    heap=$(curl -s http://127.0.0.1:1922$id/metrics | awk '/^go_memstats_heap_inuse_bytes /{printf "%d", $2/1024}')
    disk=$(du -sk $DATA/$id 2>/dev/null | cut -f1)
    echo "$(date -u +%T) broker=$id rss_kib=$rss hwm_kib=$hwm heap_inuse_kib=$heap data_kib=$disk"
  done >> $OUT/mem-samples.txt
}
( while true; do sample; sleep 3; done ) &
sampler=$!
sleep 8
mark "0 GiB written"; sample
STEP=2621440   # 2.5 GiB of 1 KiB values
for n in 1 2 3 4; do
  $TIDE bench produce --bootstrap $BOOT --topic bench --partitions 3 --replication-factor 3 --acks all --size 1024 \
    --mode throughput --records $STEP --duration 0 --warmup 0 --seed $n --json > $OUT/produce-$n.json 2> $OUT/produce-$n.err
  rc=$?
  sleep 3; mark "$((n*25/10)).$((n*25%10)) GiB written (rc $rc)"; sample
done
sleep 10; mark "10 GiB written, 10 s later"; sample
$TIDE bench consume --bootstrap $BOOT --topic bench --json > $OUT/consume.json 2> $OUT/consume.err
rc=$?; mark "consume rc $rc"
sleep 3; mark "after the full consume"; sample
sleep 10; mark "after the full consume, 10 s later"; sample
kill $sampler
for pid in "${pids[@]}"; do kill -TERM $pid; done
wait
mark "stopped"
rm -rf "$DATA"
