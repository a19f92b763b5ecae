#!/bin/sh
# Rebuilds this folder's KernelBench files from a KernelBench git dir (github.com/
# ScalingIntelligence/KernelBench; these came from its commit 423217d), each unchanged below a
# three-line header. Keep the list in step with the files kept here.
# Usage: fetch.sh KERNELBENCH_GIT_DIR
set -eu
here=$(dirname "$0")
for f in \
    1_Square_matrix_multiplication_.py \
    4_Matrix_vector_multiplication_.py \
    7_Matmul_with_small_K_dimension_.py \
    10_3D_tensor_matrix_multiplication.py \
    11_4D_tensor_matrix_multiplication.py \
    13_Matmul_for_symmetric_matrices.py \
    14_Matmul_for_upper_triangular_matrices.py \
    15_Matmul_for_lower_triangular_matrices.py \
    16_Matmul_with_transposed_A.py \
    17_Matmul_with_transposed_B.py \
    18_Matmul_with_transposed_both.py \
    19_ReLU.py \
    22_Tanh.py \
    25_Swish.py \
    28_HardSigmoid.py \
    31_ELU.py \
    33_BatchNorm.py \
    34_InstanceNorm.py \
    35_GroupNorm_.py \
    37_FrobeniusNorm_.py \
    38_L1Norm_.py \
    39_L2Norm_.py \
    41_Max_Pooling_1D.py \
    42_Max_Pooling_2D.py \
    43_Max_Pooling_3D.py \
    44_Average_Pooling_1D.py \
    45_Average_Pooling_2D.py \
    46_Average_Pooling_3D.py \
    47_Sum_reduction_over_a_dimension.py \
    48_Mean_reduction_over_a_dimension.py \
    49_Max_reduction_over_a_dimension.py \
    50_conv_standard_2D__square_input__square_kernel.py \
    51_Argmax_over_a_dimension.py \
    52_Argmin_over_a_dimension.py \
    53_Min_reduction_over_a_dimension.py \
    54_conv_standard_3D__square_input__square_kernel.py \
    57_conv_transposed_2D__square_input__square_kernel.py \
    58_conv_transposed_3D__asymmetric_input__asymmetric_kernel.py \
    59_conv_standard_3D__asymmetric_input__square_kernel.py \
    60_conv_standard_3D__square_input__asymmetric_kernel.py \
    61_conv_transposed_3D__square_input__square_kernel.py \
    64_conv_transposed_1D.py \
    65_conv_transposed_2D__square_input__asymmetric_kernel.py \
    66_conv_standard_3D__asymmetric_input__asymmetric_kernel.py \
    67_conv_standard_1D.py \
    68_conv_transposed_3D__square_input__asymmetric_kernel.py \
    69_conv_transposed_2D__asymmetric_input__asymmetric_kernel.py \
    70_conv_transposed_3D__asymmetric_input__square_kernel.py \
    71_conv_transposed_2D__asymmetric_input__square_kernel.py \
    72_conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_.py \
    73_conv_transposed_3D_asymmetric_input_square_kernel__strided_padded__grouped.py \
    74_conv_transposed_1D_dilated.py \
    75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__.py \
    76_conv_standard_1D_dilated_strided__.py \
    77_conv_transposed_3D_square_input_square_kernel___padded____dilated____strided__.py \
    78_conv_transposed_2D_asymmetric_input_asymmetric_kernel___padded__.py \
    79_conv_transposed_1D_asymmetric_input_square_kernel___padded____strided____dilated__.py \
    81_conv_transposed_2D_asymmetric_input_square_kernel___dilated____padded____strided__.py \
    83_conv_depthwise_2D_square_input_asymmetric_kernel.py \
    86_conv_depthwise_separable_2D.py \
    88_MinGPTNewGelu.py \
    89_cumsum.py \
    90_cumprod.py \
    91_cumsum_reverse.py \
    92_cumsum_exclusive.py \
    93_masked_cumsum.py \
    94_MSELoss.py \
    95_CrossEntropyLoss.py \
    96_HuberLoss.py \
    97_ScaledDotProductAttention.py \
    98_KLDivLoss.py \
    99_TripletMarginLoss.py \
    100_HingeLoss.py \
; do
    {
        echo "# KernelBench (github.com/ScalingIntelligence/KernelBench) KernelBench/level1/$f, unchanged"
        echo "# below these lines. MIT License, Copyright (c) 2023 Anne Ouyang, Simon Guo, Azalia Mirhoseini;"
        echo "# the full text is LICENSE in this folder."
        git --git-dir="$1" show "HEAD:KernelBench/level1/$f"
    } > "$here/$f"
done
