# The last H200 call of 2026-12-04: this tree only (the before figures come from the first call).
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw || exit 1
export PATH=/tmp/bw/usr/bin:$PATH PYTHONPATH=/tmp/site
S=/tmp/s; mkdir -p $S
echo "after $(cat .gpu/after.commit)" | tee -a $OUT/h200.log
pack() { (cd $S && find . \( -name events.jsonl -o -name show.json \) -print) > /tmp/packed; tar -czf $OUT/res.tgz -C $S -T /tmp/packed; }
t0=$(date +%s.%N)
KERNELBRAIN_SESSIONS=$S/readme TRITON_CACHE_DIR=/tmp/tc_readme python3 -m engine.cli run rmsnorm --headless --budget 40evals --backend cuda > $S/readme.out 2>&1
echo "readme_after rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")" | tee -a $OUT/h200.log
for n in $(ls $S/readme); do python3 -m engine.cli show $n --json --sessions-dir $S/readme > $S/readme/$n/show.json; done
tail -4 $S/readme.out | tee -a $OUT/h200.log
pack
for p in linear_relu_div groupconv softmax; do
  python3 -m engine.benchmarks.eval_plane --backend cuda --skip-before --problems $p --evals 40 --sessions-dir $S --out $OUT/eval_plane.jsonl --results-json $OUT/eval_plane.json --after-commit "$(cat .gpu/after.commit)" >> $OUT/h200.log 2>&1
  pack
done
python3 -m engine.benchmarks.eval_plane --backend cuda --skip-before --problems --check tests/candidates/softmax_online.py --check-problem softmax --sessions-dir $S --out $OUT/eval_plane.jsonl --results-json $OUT/eval_plane.json --after-commit "$(cat .gpu/after.commit)" >> $OUT/h200.log 2>&1
pack
