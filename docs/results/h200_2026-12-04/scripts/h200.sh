# One H200 call: the judge and a search on this tree, side by side with main at 5c856f6 (.gpu/base).
# Usage: bash .gpu/h200.sh PART   (PART: new | base); results under $OUT as they come.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw
export PATH=/tmp/bw/usr/bin:$PATH PYTHONPATH=/tmp/site
LOG=$OUT/h200.log RES=/tmp/res  # RES is packed into $OUT/res.tgz at the end (8 files come back)
mkdir -p $RES
stamp() { date +%s.%N; }
timed() {  # name, command...: wall seconds and exit status into the log, output into $OUT/name.out
  local name=$1; shift; local t0; t0=$(stamp)
  "$@" > "$RES/$name.out" 2>&1; local rc=$?
  echo "$name rc=$rc wall_s=$(awk "BEGIN{print $(stamp) - $t0}")" | tee -a "$LOG"
}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv | tee -a "$LOG"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$LOG"
ROOT=$PWD
if [ "$1" = new ]; then
  timed doctor python3 -m engine.cli doctor
  timed check_valid python3 -m engine.cli check softmax tests/candidates/softmax_valid.py --backend cuda
  timed judge_attacks python3 .gpu/judge_cuda.py
  timed run_rmsnorm python3 -m engine.cli run rmsnorm --headless --budget 40evals --backend cuda --session r40 --sessions-dir /tmp/s
  python3 -m engine.cli show r40 --json --sessions-dir /tmp/s > "$RES/run_rmsnorm_show.json" 2>&1
else
  timed check_online python3 -m engine.cli check softmax .gpu/softmax_online.py --backend cuda
  (cd "$ROOT/.gpu/base" && timed base_check_online python3 -m engine.cli check softmax "$ROOT/.gpu/softmax_online.py" --backend cuda)
  (cd "$ROOT/.gpu/base" && timed base_run_rmsnorm python3 -m engine.cli run rmsnorm --headless --budget 40evals --backend cuda --session r40 --sessions-dir /tmp/sb)
  cp /tmp/sb/r40/events.jsonl "$RES/base_run_rmsnorm_events.jsonl"
  (cd "$ROOT/.gpu/base" && python3 -m engine.cli show r40 --json --sessions-dir /tmp/sb > "$RES/base_run_rmsnorm_show.json" 2>&1)
  timed run_rmsnorm20 python3 -m engine.cli run rmsnorm --headless --budget 20evals --backend cuda --session r20 --sessions-dir /tmp/s
  cp /tmp/s/r20/events.jsonl "$RES/run_rmsnorm20_events.jsonl"
  python3 -m engine.cli show r20 --json --sessions-dir /tmp/s > "$RES/run_rmsnorm20_show.json" 2>&1
fi
tar -czf "$OUT/res.tgz" -C "$RES" .
