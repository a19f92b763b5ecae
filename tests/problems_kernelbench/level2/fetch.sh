#!/bin/sh
# Rebuilds this folder's KernelBench files from a KernelBench git dir (github.com/
# ScalingIntelligence/KernelBench; these came from its commit 423217d), each unchanged below a
# three-line header. Keep the list in step with the files kept here.
# Usage: fetch.sh KERNELBENCH_GIT_DIR
set -eu
here=$(dirname "$0")
for f in \
    1_Conv2D_ReLU_BiasAdd.py \
    2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py \
    3_ConvTranspose3d_Sum_LayerNorm_AvgPool_GELU.py \
    6_Conv3d_Softmax_MaxPool_MaxPool.py \
    9_Matmul_Subtract_Multiply_ReLU.py \
    13_ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling.py \
    14_Gemm_Divide_Sum_Scaling.py \
    17_Conv2d_InstanceNorm_Divide.py \
    19_ConvTranspose2d_GELU_GroupNorm.py \
    20_ConvTranspose3d_Sum_ResidualAdd_Multiply_ResidualAdd.py \
    28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply.py \
    30_Gemm_GroupNorm_Hardtanh.py \
    31_Conv2d_Min_Add_Multiply.py \
    33_Gemm_Scale_BatchNorm.py \
    37_Matmul_Swish_Sum_GroupNorm.py \
    38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py \
    40_Matmul_Scaling_ResidualAdd.py \
    43_Conv3d_Max_LogSumExp_ReLU.py \
    45_Gemm_Sigmoid_LogSumExp.py \
    46_Conv2d_Subtract_Tanh_Subtract_AvgPool.py \
    48_Conv3d_Scaling_Tanh_Multiply_Sigmoid.py \
    52_Conv2d_Activation_BatchNorm.py \
    54_Conv2d_Multiply_LeakyReLU_GELU.py \
    55_Matmul_MaxPool_Sum_Scale.py \
    57_Conv2d_ReLU_HardSwish.py \
    58_ConvTranspose3d_LogSumExp_HardSwish_Subtract_Clamp.py \
    59_Matmul_Swish_Scaling.py \
    67_Conv2d_GELU_GlobalAvgPool.py \
    68_Matmul_Min_Subtract.py \
    76_Gemm_Add_ReLU.py \
    80_Gemm_Max_Subtract_GELU.py \
    83_Conv3d_GroupNorm_Min_Clamp_Dropout.py \
    89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max.py \
    92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py \
    93_ConvTranspose2d_Add_Min_GELU_Multiply.py \
    95_Matmul_Add_Swish_Tanh_GELU_Hardtanh.py \
    98_Matmul_AvgPool_GELU_Scale_Max.py \
    99_Matmul_GELU_Softmax.py \
; do
    {
        echo "# KernelBench (github.com/ScalingIntelligence/KernelBench) KernelBench/level2/$f, unchanged"
        echo "# below these lines. MIT License, Copyright (c) 2023 Anne Ouyang, Simon Guo, Azalia Mirhoseini;"
        echo "# the full text is LICENSE in this folder."
        git --git-dir="$1" show "HEAD:KernelBench/level2/$f"
    } > "$here/$f"
done
