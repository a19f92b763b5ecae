# Session 42, call 2 (tree with the judge's memory fit): the README command watched (GPU memory
# every 5 s, events as they come), stopped at 170 s; then `check` of softmax_online timed.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw || exit 1
export PATH=/tmp/bw/usr/bin:/tmp/site/bin:$PATH PYTHONPATH=/tmp/site
S=/tmp/s; mkdir -p $S
{ git rev-parse --short HEAD 2>/dev/null || cat .gpu/after.commit; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; } | tee $OUT/watch.log
KERNELBRAIN_SESSIONS=$S timeout 170 python3 -m engine.cli run rmsnorm --headless --budget 40evals --backend cuda --session r > $OUT/readme.out 2>&1 &
pid=$!; t0=$(date +%s.%N)
while kill -0 $pid 2>/dev/null; do
  sleep 5
  echo "t=$(awk "BEGIN{print $(date +%s.%N) - $t0}") $(nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader) host_used_g=$(free -g | awk '/Mem/{print $3}')" >> $OUT/watch.log
  cp $S/r/events.jsonl $OUT/events.jsonl 2>/dev/null
done
wait $pid; echo "readme rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")" >> $OUT/watch.log
cp $S/r/events.jsonl $OUT/events.jsonl 2>/dev/null
python3 -m engine.cli show r --json --sessions-dir $S > $OUT/show.json 2>&1
t0=$(date +%s.%N)
timeout 80 python3 -m engine.cli check softmax tests/candidates/softmax_online.py --backend cuda > $OUT/check.out 2>&1
echo "check rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")" >> $OUT/watch.log
