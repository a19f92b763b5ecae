# One device call (about 9 minutes) of the checks that come before a level 3 bench: the CUDA-graph
# check, the TF32 conv check, the spread recurrences and the launchers' Python on the GPU host,
# each bounded, each into its own file under $OUT. Needs .gpu/KernelBench/level3 (KernelBench's
# files) and .whl/ (duckdb and tenacity for Python 3.12), carried. The benches follow in calls
# of their own: `LIMIT=560 bash docs/results/kernelbench_level3_gpu/bench_call.sh N...`.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:.
L3=.gpu/KernelBench/level3
timeout 180 python3 docs/results/kernelbench_level3_gpu/graph_check.py $L3/28_*.py $L3/9_*.py $L3/3_*.py $L3/32_*.py > $OUT/graphs.out 2>&1
echo "graphs rc=$?" >> $OUT/graphs.out
timeout 120 python3 docs/results/kernelbench_level3_gpu/conv_variants.py tree > $OUT/conv_tree.out 2>&1
echo "conv rc=$?" >> $OUT/conv_tree.out
timeout 140 python3 docs/results/kernelbench_level3_gpu/recurrent_variants.py > $OUT/recurrent.out 2>&1
echo "recurrent rc=$?" >> $OUT/recurrent.out
timeout 60 python3 -m engine.benchmarks.launch_overhead > $OUT/launch.out 2>&1
echo "launch rc=$?" >> $OUT/launch.out
timeout 80 python3 -m engine.benchmarks.launch_overhead --model $L3/28_*.py $L3/9_*.py $L3/7_*.py >> $OUT/launch.out 2>&1
echo "launch --model rc=$?" >> $OUT/launch.out
