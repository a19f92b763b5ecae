# Session 41, call 3: the README command (after tree) on this card, watched: its events and the
# GPU's memory every 10 s, stopped at 220 s.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw || exit 1
export PATH=/tmp/bw/usr/bin:/tmp/site/bin:$PATH PYTHONPATH=/tmp/site
S=/tmp/s; mkdir -p $S
nvidia-smi --query-gpu=name,memory.total --format=csv | tee $OUT/watch.log
KERNELBRAIN_SESSIONS=$S timeout 220 python3 -m engine.cli run rmsnorm --headless --budget 40evals --backend cuda --session r > $OUT/readme.out 2>&1 &
pid=$!; t0=$(date +%s)
while kill -0 $pid 2>/dev/null; do
  sleep 10
  echo "t=$(( $(date +%s) - t0 )) $(nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader) host_used_g=$(free -g | awk '/Mem/{print $3}')" >> $OUT/watch.log
  cp $S/r/events.jsonl $OUT/events.jsonl 2>/dev/null
  ps -eo pid,rss,etime,args --sort=-rss | head -8 > $OUT/ps.txt
done
wait $pid; echo "rc=$? wall=$(( $(date +%s) - t0 ))" >> $OUT/watch.log
cp $S/r/events.jsonl $OUT/events.jsonl 2>/dev/null
python3 -m engine.cli show r --json --sessions-dir $S > $OUT/show.json 2>&1
