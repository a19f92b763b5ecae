# One device call of the level 3 bench (issue 31): `bash bench_call.sh N...` benches the level 3
# files numbered N... (`.gpu/KernelBench/level3/N_*.py`, KernelBench's own files) at their own
# sizes, 15 GPU-s a search, the default --jobs, going on from the calls before it (.gpu/cuda.json
# and .gpu/sessions.tgz, when there are: docs/results/device_bench.sh says how). The files are
# benched from one fixed path, /tmp/l3, which the sessions name. To search a file afresh, leave
# its sessions out of .gpu/sessions.tgz. LIMIT (default 520) bounds the bench.
mkdir -p /tmp/l3 && cp .gpu/KernelBench/level3/*.py /tmp/l3/ || exit 1
files=$(for n in "$@"; do ls /tmp/l3/${n}_*.py; done)
bash docs/results/device_bench.sh $files --budget-per-problem 15gpu-s --seed 0
