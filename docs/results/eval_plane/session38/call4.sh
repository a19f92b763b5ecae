# Session 38, call 4: the README's command and `check` on the final tree (eval_plane rows).
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw || exit 1
export PATH=/tmp/bw/usr/bin:/tmp/site/bin:$PATH PYTHONPATH=/tmp/site
S=/tmp/s; mkdir -p $S
C=$(cat .gpu/after.commit); cd .gpu/tree || exit 1
log() { echo "$(date +%T) $*" | tee -a $OUT/h200.log; }
pack() { (cd $S && find . \( -name events.jsonl -o -name show.json \) -print) > /tmp/packed; tar -czf $OUT/res.tgz -C $S -T /tmp/packed; }
log "tree $C"
t0=$(date +%s.%N)
KERNELBRAIN_SESSIONS=$S/readme TRITON_CACHE_DIR=/tmp/tc_readme timeout 170 python3 -m engine.cli run rmsnorm --headless --budget 40evals --backend cuda > $S/readme.out 2>&1
log "readme rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")"
tail -3 $S/readme.out >> $OUT/h200.log
for n in $(ls $S/readme); do python3 -m engine.cli show $n --json --all --sessions-dir $S/readme > $S/readme/$n/show.json; done
pack
timeout 80 python3 -m engine.benchmarks.eval_plane --backend cuda --skip-before --problems --check tests/candidates/softmax_online.py --check-problem softmax --sessions-dir $S --out $OUT/eval_plane.jsonl --results-json $OUT/eval_plane.json --after-commit "$C" >> $OUT/h200.log 2>&1
log "check rc=$?"
pack
