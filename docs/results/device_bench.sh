# One device call of `kernelbrain bench ARGS... --backend $BACKEND --out /tmp/kb` (BACKEND
# default cuda, the default --jobs) that goes on from the calls before it. From $CARRY (default
# .gpu, carried with the call) it takes the earlier results ($BACKEND.json: the bench adds to
# them) and the earlier
# sessions (sessions.tgz: the bench resumes a session of the same settings in its --out, so a
# search cut short goes on from its checkpoint and a finished one is only timed). It needs
# .whl/ (duckdb, tenacity and einops wheels for the device's Python) and bubblewrap's Debian
# package in .gpu/ where they are missing (`BACKEND=cpu OUT=/tmp/out bash device_bench.sh ...`
# in the venv tries a call's steps on this machine). LIMIT (default 520) bounds the bench; it is interrupted as by Ctrl-C and its
# searches stop at their checkpoints. Back under $OUT: env.log, bench.out, the results (.json
# and .md, copied every 20 s too, so a call cut short keeps what was timed), sessions.tgz (copy
# it and the .json to $CARRY for the next call) and events.tgz (each search's last 300 events).
# A session names its problem's file: bench files from the same path in every call.
set -u
export PYTHONUNBUFFERED=1
CARRY=${CARRY:-.gpu} BACKEND=${BACKEND:-cuda}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>/dev/null || python3 -c "import duckdb, tenacity, einops" || exit 1
command -v bwrap >/dev/null || { mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw; } || exit 1
export PATH=/tmp/bw/usr/bin:/tmp/site/bin:$PATH PYTHONPATH=/tmp/site
{ git rev-parse --short HEAD 2>/dev/null || cat .gpu/commit; command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; free -g | head -2; } > $OUT/env.log
mkdir -p /tmp/kb
[ -f $CARRY/$BACKEND.json ] && cp $CARRY/$BACKEND.json /tmp/kb/
[ -f $CARRY/sessions.tgz ] && tar xzf $CARRY/sessions.tgz -C /tmp/kb && echo "sessions carried: $(ls /tmp/kb/sessions | wc -l)" >> $OUT/env.log
( while sleep 20; do cp /tmp/kb/$BACKEND.json /tmp/kb/$BACKEND.md $OUT/ 2>/dev/null; done ) &
copier=$!
t0=$(date +%s)
KERNELBRAIN_SESSIONS=/tmp/s timeout -s INT -k 15 ${LIMIT:-520} python3 -m engine.cli bench "$@" \
  --backend $BACKEND --out /tmp/kb > $OUT/bench.out 2>&1
echo "bench rc=$? wall_s=$(( $(date +%s) - t0 ))" >> $OUT/env.log
kill $copier
cp /tmp/kb/$BACKEND.json /tmp/kb/$BACKEND.md $OUT/ 2>/dev/null
tar czf $OUT/sessions.tgz -C /tmp/kb sessions
# Why a search without a passing candidate found none: the generator's notes and refusals, every
# verdict. One archive: a call brings back at most 8 files.
mkdir -p /tmp/events
for f in /tmp/kb/sessions/*/events.jsonl; do tail -n 300 "$f" > "/tmp/events/$(basename "$(dirname "$f")").jsonl"; done
tar czf $OUT/events.tgz -C /tmp events
