# Session 44, call 8 (an H200): issue 34's ablation of rmsnorm at 30 GPU-s a search (the ladder,
# then the flat search over its candidates, then eager, torch.compile and the best timed), bounded.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw || exit 1
export PATH=/tmp/bw/usr/bin:/tmp/site/bin:$PATH PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,memory.total --format=csv | tee $OUT/watch.log
t0=$(date +%s.%N)
timeout 290 python3 -m engine.cli bench rmsnorm --ablation rmsnorm --budget-per-problem 30gpu-s --backend cuda --out /tmp/bench > $OUT/bench.out 2>&1
echo "bench rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")" >> $OUT/watch.log
cp /tmp/bench/*.json /tmp/bench/*.md $OUT/ 2>/dev/null
