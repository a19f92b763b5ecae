# Session 41, call 1: rmsnorm's 40-evaluation search (the README command) before (f712686) and
# after (HEAD) side by side, check in both trees, then a py-spy profile of check after.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw || exit 1
export PATH=/tmp/bw/usr/bin:/tmp/site/bin:$PATH PYTHONPATH=/tmp/site
S=/tmp/s; mkdir -p $S; LOG=$OUT/h200.log
{ echo "before $(cat .gpu/base/.commit) after $(cat .gpu/after.commit)"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; bwrap --version; nproc; free -g | head -2; } 2>&1 | tee -a $LOG
pack() { (cd $S && find . \( -name events.jsonl -o -name show.json -o -name state.duckdb \) -print) > /tmp/packed; tar -czf /tmp/sessions.tgz -C $S -T /tmp/packed && mv /tmp/sessions.tgz $OUT/sessions.tgz; }
t0=$(date +%s)
python3 -m engine.benchmarks.eval_plane --backend cuda --before $PWD/.gpu/base --after-commit "$(cat .gpu/after.commit)" \
  --problems rmsnorm --evals 40 --check tests/candidates/softmax_online.py --check-problem softmax \
  --sessions-dir $S --out $OUT/eval_plane.jsonl --results-json $OUT/eval_plane.json > $OUT/eval_plane.out 2>&1
echo "eval_plane rc=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a $LOG
pack
t0=$(date +%s)
py-spy record --subprocesses --nonblocking -r 50 -f speedscope -o $OUT/spy_check.json -- \
  python3 -m engine.cli check softmax tests/candidates/softmax_online.py --backend cuda > $OUT/spy_check.out 2>&1
echo "spy_check rc=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a $LOG
