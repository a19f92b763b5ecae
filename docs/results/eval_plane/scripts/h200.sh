# One H200 call: the evaluation plane's cost in real searches (engine/benchmarks/eval_plane.py),
# this tree beside an older commit in .gpu/base (`sh .gpu/make_base.sh COMMIT` first; the call
# carries .whl and .gpu). Usage: bash .gpu/h200.sh PART [PROBLEM...]
#   compare [P...]  each problem's search at $EVALS evaluations (10), the before tree then this one
#   after40 [P...]  each problem's search at 40 evaluations in this tree only; with no problem
#                   named, the six, then the parts check and readme
#   check           `check softmax tests/candidates/softmax_online.py` timed in both trees
#   readme          the README's first command (rmsnorm, 40 evaluations) timed in both trees
# Under $OUT as they come: h200.log (versions, each step's wall time), eval_plane.jsonl (rows),
# eval_plane.json (their summary), res.tgz (each step's output, the sessions' events.jsonl and
# show --json; packed again after each step, so a call cut short keeps what it finished).
set -u
export PYTHONUNBUFFERED=1
PART=${1:?usage: bash .gpu/h200.sh compare|after40|check|readme [PROBLEM...]}
shift
PROBLEMS=${*:-groupconv matvec rmsnorm softmax linear_relu_div sdpa}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw || exit 1
export PATH=/tmp/bw/usr/bin:$PATH PYTHONPATH=/tmp/site
ROOT=$PWD BASE=$PWD/.gpu/base LOG=$OUT/h200.log RES=/tmp/res S=/tmp/s
mkdir -p "$RES" "$S"
stamp() { date +%s.%N; }
timed() {  # name, command...: wall seconds and exit status into the log, output into $RES/name.out
  local name=$1; shift; local t0; t0=$(stamp)
  "$@" > "$RES/$name.out" 2>&1; local rc=$?
  echo "$name rc=$rc wall_s=$(awk "BEGIN{print $(stamp) - $t0}")" | tee -a "$LOG"
}
pack() {  # $RES and the sessions' events and show --json into $OUT/res.tgz
  (cd "$S" && find . \( -name events.jsonl -o -name show.json \) -print) > /tmp/packed
  tar -czf /tmp/res.tgz -C "$RES" . -C "$S" -T /tmp/packed && mv /tmp/res.tgz "$OUT/res.tgz"
}
plane() {  # name, eval_plane arguments...
  local name=$1; shift
  timed "$name" python3 -m engine.benchmarks.eval_plane --backend cuda --before "$BASE" \
    --after-commit "$(cat .gpu/after.commit 2>/dev/null)" --sessions-dir "$S" \
    --out "$OUT/eval_plane.jsonl" --results-json "$OUT/eval_plane.json" "$@"
  pack
}
readme() {  # tree name, tree: the README's first command there, a cold Triton cache of its own
  local dir=$S/readme_$1 name
  (cd "$2" && KERNELBRAIN_SESSIONS=$dir TRITON_CACHE_DIR=/tmp/triton_readme_$1 \
    PYTHONPATH=$2:/tmp/site timed "readme_$1" \
    python3 -m engine.cli run rmsnorm --headless --budget 40evals --backend cuda)
  for name in $(ls "$dir"); do
    (cd "$2" && PYTHONPATH=$2:/tmp/site python3 -m engine.cli show "$name" --json \
      --sessions-dir "$dir" > "$dir/$name/show.json" 2>&1)
  done
  pack
}
{ echo "part $PART: $PROBLEMS; before $(cat .gpu/base/.commit 2>/dev/null)," \
    "after $(cat .gpu/after.commit 2>/dev/null)"
  nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv
  python3 -c "import torch, triton, duckdb, tenacity
print('torch', torch.__version__, 'triton', triton.__version__, 'duckdb', duckdb.__version__)"
  bwrap --version; } 2>&1 | tee -a "$LOG"
case $PART in
  compare)
    for p in $PROBLEMS; do plane "compare_$p" --problems "$p" --evals "${EVALS:-10}"; done ;;
  after40)
    for p in $PROBLEMS; do plane "after40_$p" --problems "$p" --evals 40 --skip-before; done
    if [ $# -eq 0 ]; then
      plane check --problems --check tests/candidates/softmax_online.py --check-problem softmax
      readme before "$BASE"; readme after "$ROOT"
    fi ;;
  check)
    plane check --problems --check tests/candidates/softmax_online.py --check-problem softmax ;;
  readme)
    readme before "$BASE"; readme after "$ROOT" ;;
  *) echo "unknown part $PART" | tee -a "$LOG"; exit 2 ;;
esac
pack
