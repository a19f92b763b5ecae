# Session 38, call 1: where an evaluation's seconds go (py-spy over the README's command) and
# machine faults charged to candidates in a loaded bench of 22 KernelBench L1/L2 files.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw || exit 1
export PATH=/tmp/bw/usr/bin:/tmp/site/bin:$PATH PYTHONPATH=/tmp/site
S=/tmp/s; mkdir -p $S
C=$(cat .gpu/after.commit); cd .gpu/tree || exit 1  # the committed tree, not the working one
log() { echo "$(date +%T) $*" | tee -a $OUT/h200.log; }
log "tree $C; nproc $(nproc); free -g: $(free -g | awk '/Mem/{print $2, $7}')"
t0=$(date +%s.%N)
KERNELBRAIN_SESSIONS=$S/readme TRITON_CACHE_DIR=/tmp/tc_readme timeout 200 py-spy record --subprocesses --idle --rate 50 --format raw -o $OUT/readme_pyspy.txt -- python3 -m engine.cli run rmsnorm --headless --budget 40evals --backend cuda > $S/readme.out 2>&1
log "readme rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")"
tail -5 $S/readme.out >> $OUT/h200.log
for n in $(ls $S/readme); do python3 -m engine.cli show $n --json --all --sessions-dir $S/readme > $OUT/readme_show.json; cp $S/readme/$n/events.jsonl $OUT/readme_events.jsonl; done
FILES=$(python3 -m engine.benchmarks.kernelbench_order | tr ' ' '\n' | head -22 | tr '\n' ' ')
t0=$(date +%s.%N)
TRITON_CACHE_DIR=/tmp/tc_bench timeout 330 python3 -m engine.cli bench $FILES --backend cuda --budget-per-problem 6evals --jobs auto --seed 0 --out /tmp/kb > $OUT/bench.out 2>&1
log "bench rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")"
cp /tmp/kb/cuda.json /tmp/kb/cuda.md $OUT/ 2>/dev/null
for d in /tmp/kb/sessions/*; do python3 -m engine.cli show $(basename $d) --json --all --sessions-dir /tmp/kb/sessions > $OUT/show_$(basename $d).json 2>/dev/null; done
log "shows packed"
timeout 150 python3 -m engine.benchmarks.env_failures /tmp/kb --backend cuda --recheck-limit 3 --json $OUT/env_failures.json > $OUT/env_failures.out 2>&1
log "env_failures rc=$?"; tail -1 $OUT/env_failures.out >> $OUT/h200.log
