#!/bin/sh
# Rebuilds this folder's KernelBench files from a KernelBench git dir (github.com/
# ScalingIntelligence/KernelBench; these came from its commit 423217d), each unchanged below a
# three-line header. Keep the list in step with the files kept here.
# Usage: fetch.sh KERNELBENCH_GIT_DIR
set -eu
here=$(dirname "$0")
for f in \
    11_4D_tensor_matrix_multiplication.py \
    14_Matmul_for_upper_triangular_matrices.py \
    15_Matmul_for_lower_triangular_matrices.py \
    16_Matmul_with_transposed_A.py \
    17_Matmul_with_transposed_B.py \
    18_Matmul_with_transposed_both.py \
    33_BatchNorm.py \
    34_InstanceNorm.py \
    35_GroupNorm_.py \
    37_FrobeniusNorm_.py \
    38_L1Norm_.py \
    41_Max_Pooling_1D.py \
    42_Max_Pooling_2D.py \
    43_Max_Pooling_3D.py \
    44_Average_Pooling_1D.py \
    45_Average_Pooling_2D.py \
    46_Average_Pooling_3D.py \
    47_Sum_reduction_over_a_dimension.py \
    48_Mean_reduction_over_a_dimension.py \
    49_Max_reduction_over_a_dimension.py \
    51_Argmax_over_a_dimension.py \
    52_Argmin_over_a_dimension.py \
    53_Min_reduction_over_a_dimension.py \
    88_MinGPTNewGelu.py \
    89_cumsum.py \
    90_cumprod.py \
    91_cumsum_reverse.py \
    92_cumsum_exclusive.py \
    93_masked_cumsum.py \
    94_MSELoss.py \
    95_CrossEntropyLoss.py \
    96_HuberLoss.py \
    98_KLDivLoss.py \
    100_HingeLoss.py \
; do
    {
        echo "# KernelBench (github.com/ScalingIntelligence/KernelBench) KernelBench/level1/$f, unchanged"
        echo "# below these lines. MIT License, Copyright (c) 2023 Anne Ouyang, Simon Guo, Azalia Mirhoseini;"
        echo "# the full text is LICENSE in this folder."
        git --git-dir="$1" show "HEAD:KernelBench/level1/$f"
    } > "$here/$f"
done
