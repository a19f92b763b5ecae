# Session 44, call 7 (an H200): call6's steps (the README command with GPU memory watched, then
# `check`), then issue 34's ablation of rmsnorm (ladder and flat search, 60 GPU-s each); every
# step bounded, its output under $OUT as it goes.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw || exit 1
export PATH=/tmp/bw/usr/bin:/tmp/site/bin:$PATH PYTHONPATH=/tmp/site
S=/tmp/s; mkdir -p $S
{ git rev-parse --short HEAD 2>/dev/null || cat .gpu/after.commit; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; } | tee $OUT/watch.log
KERNELBRAIN_SESSIONS=$S timeout 190 python3 -m engine.cli run rmsnorm --headless --budget 40evals --backend cuda --session r > $OUT/readme.out 2>&1 &
pid=$!; t0=$(date +%s.%N)
while kill -0 $pid 2>/dev/null; do
  sleep 5
  echo "t=$(awk "BEGIN{print $(date +%s.%N) - $t0}") $(nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader) host_used_g=$(free -g | awk '/Mem/{print $3}')" >> $OUT/watch.log
done
wait $pid; echo "readme rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")" >> $OUT/watch.log
cp $S/r/events.jsonl $OUT/events.jsonl 2>/dev/null
python3 -m engine.cli show r --json --sessions-dir $S > $OUT/show.json 2>&1
t0=$(date +%s.%N)
timeout 60 python3 -m engine.cli check softmax tests/candidates/softmax_online.py --backend cuda > $OUT/check.out 2>&1
echo "check rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")" >> $OUT/watch.log
t0=$(date +%s.%N)
KERNELBRAIN_SESSIONS=$S/bench timeout 250 python3 -m engine.cli bench rmsnorm --ablation rmsnorm --budget-per-problem 60gpu-s --backend cuda --out $OUT/bench > $OUT/bench.out 2>&1
echo "bench rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")" >> $OUT/watch.log
