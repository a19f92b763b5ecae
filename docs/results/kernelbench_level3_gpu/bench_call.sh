# One device call of the level 3 bench (issue 31): `bash bench_call.sh N...` benches the level 3
# files numbered N... (`.gpu/KernelBench/level3/N_*.py`, KernelBench's own files) at their own
# sizes, 15 GPU-s a search, the default --jobs, into an --out that already holds the earlier
# calls' results (.gpu/cuda.json, when there is one). The results go to $OUT every 20 s and at
# the end, so a call cut short keeps what it finished. LIMIT (default 520) bounds the bench.
#
# The searches carry over between calls: the bench's sessions come back as $OUT/sessions.tgz,
# and a call that finds .gpu/sessions.tgz starts from them, so a search cut short by the limit
# goes on from its checkpoint and a finished one that was not timed is timed without searching
# again (the bench resumes a session of the same settings in its --out). The files are benched
# from one fixed path (/tmp/l3), which the sessions name. To search a file afresh, leave its
# sessions out of the archive.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw || exit 1
export PATH=/tmp/bw/usr/bin:/tmp/site/bin:$PATH PYTHONPATH=/tmp/site
{ cat .gpu/commit; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; free -g | head -2; } > $OUT/env.log
mkdir -p /tmp/kb /tmp/l3
cp .gpu/KernelBench/level3/*.py /tmp/l3/
[ -f .gpu/cuda.json ] && cp .gpu/cuda.json /tmp/kb/cuda.json
[ -f .gpu/sessions.tgz ] && tar xzf .gpu/sessions.tgz -C /tmp/kb && echo "sessions carried: $(ls /tmp/kb/sessions | wc -l)" >> $OUT/env.log
files=$(for n in "$@"; do ls /tmp/l3/${n}_*.py; done)
( while sleep 20; do cp /tmp/kb/cuda.json /tmp/kb/cuda.md $OUT/ 2>/dev/null; done ) &
t0=$(date +%s)
KERNELBRAIN_SESSIONS=/tmp/s timeout -s INT -k 15 ${LIMIT:-520} python3 -m engine.cli bench $files \
  --backend cuda --budget-per-problem 15gpu-s --seed 0 --out /tmp/kb > $OUT/bench.out 2>&1
echo "bench rc=$? wall_s=$(( $(date +%s) - t0 ))" >> $OUT/env.log
cp /tmp/kb/cuda.json /tmp/kb/cuda.md $OUT/ 2>/dev/null
tar czf $OUT/sessions.tgz -C /tmp/kb sessions
# Each search's last events (the generator's notes and refusals, every verdict): why a search
# without a passing candidate found none. One archive: a call brings back at most 8 files.
mkdir -p /tmp/events
for f in /tmp/kb/sessions/*/events.jsonl; do tail -n 300 "$f" > "/tmp/events/$(basename "$(dirname "$f")").jsonl"; done
tar czf $OUT/events.tgz -C /tmp events
