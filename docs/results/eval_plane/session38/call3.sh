# Session 38, call 3: the README's command on the fixed tree, then machine faults charged to
# candidates in a loaded bench (--jobs auto) of 22 KernelBench L1/L2 files at their own sizes.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/bw && dpkg -x .gpu/bubblewrap_*.deb /tmp/bw || exit 1
export PATH=/tmp/bw/usr/bin:/tmp/site/bin:$PATH PYTHONPATH=/tmp/site
S=/tmp/s; mkdir -p $S
C=$(cat .gpu/after.commit); cd .gpu/tree || exit 1
log() { echo "$(date +%T) $*" | tee -a $OUT/h200.log; }
pack() { tar -czf $OUT/res.tgz -C /tmp s kb 2>/dev/null; }
log "tree $C"
t0=$(date +%s.%N)
KERNELBRAIN_SESSIONS=$S/readme TRITON_CACHE_DIR=/tmp/tc_readme timeout 140 python3 -m engine.cli run rmsnorm --headless --budget 40evals --backend cuda > $S/readme.out 2>&1
log "readme rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")"
tail -3 $S/readme.out >> $OUT/h200.log
for n in $(ls $S/readme); do python3 -m engine.cli show $n --json --all --sessions-dir $S/readme > $S/readme/$n/show.json; done
pack
FILES="tests/problems_kernelbench/sample/level1/50_conv_standard_2D__square_input__square_kernel.py tests/problems_kernelbench/sample/level1/1_Square_matrix_multiplication_.py tests/problems_kernelbench/sample/level2/9_Matmul_Subtract_Multiply_ReLU.py tests/problems_kernelbench/sample/level1/57_conv_transposed_2D__square_input__square_kernel.py tests/problems_kernelbench/sample/level2/6_Conv3d_Softmax_MaxPool_MaxPool.py tests/problems_kernelbench/sample/level2/2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py tests/problems_kernelbench/sample/level2/3_ConvTranspose3d_Sum_LayerNorm_AvgPool_GELU.py tests/problems_kernelbench/sample/level1/61_conv_transposed_3D__square_input__square_kernel.py tests/problems_kernelbench/sample/level1/95_CrossEntropyLoss.py tests/problems_kernelbench/sample/level2/37_Matmul_Swish_Sum_GroupNorm.py tests/problems_kernelbench/sample/level1/7_Matmul_with_small_K_dimension_.py tests/problems_kernelbench/sample/level1/66_conv_standard_3D__asymmetric_input__asymmetric_kernel.py tests/problems_kernelbench/sample/level2/1_Conv2D_ReLU_BiasAdd.py tests/problems_kernelbench/sample/level1/97_ScaledDotProductAttention.py tests/problems_kernelbench/sample/level1/10_3D_tensor_matrix_multiplication.py tests/problems_kernelbench/sample/level1/13_Matmul_for_symmetric_matrices.py tests/problems_kernelbench/sample/level1/16_Matmul_with_transposed_A.py tests/problems_kernelbench/sample/level1/83_conv_depthwise_2D_square_input_asymmetric_kernel.py tests/problems_kernelbench/sample/level1/74_conv_transposed_1D_dilated.py tests/problems_kernelbench/sample/level2/54_Conv2d_Multiply_LeakyReLU_GELU.py tests/problems_kernelbench/sample/level2/59_Matmul_Swish_Scaling.py tests/problems_kernelbench/sample/level2/80_Gemm_Max_Subtract_GELU.py"
t0=$(date +%s.%N)
TRITON_CACHE_DIR=/tmp/tc_bench timeout 330 python3 -m engine.cli bench $FILES --backend cuda --budget-per-problem 4evals --jobs auto --seed 0 --out /tmp/kb > $S/bench.out 2>&1
log "bench rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")"
cp $S/bench.out /tmp/kb/cuda.md /tmp/kb/cuda.json $OUT/ 2>/dev/null
pack
timeout 75 python3 -m engine.benchmarks.env_failures /tmp/kb --backend cuda --recheck-limit 2 --json $OUT/env_failures.json > $OUT/env_failures.out 2>&1
log "env_failures rc=$?"; tail -1 $OUT/env_failures.out >> $OUT/h200.log
for d in /tmp/kb/sessions/*; do python3 -m engine.cli show $(basename $d) --json --all --sessions-dir /tmp/kb/sessions > $d/show.json 2>/dev/null; done
pack
