#!/bin/sh
# Rebuilds this folder's KernelBench files from a KernelBench git dir (github.com/
# ScalingIntelligence/KernelBench; these came from its commit 423217d), each unchanged below a
# three-line header. Keep the list in step with the files kept here.
# Usage: fetch.sh KERNELBENCH_GIT_DIR
set -eu
here=$(dirname "$0")
for f in \
    1_MLP.py \
    8_ResNetBasicBlock.py \
    34_VanillaRNNHidden.py \
    39_GRU.py \
    43_MinGPTCausalAttention.py \
; do
    {
        echo "# KernelBench (github.com/ScalingIntelligence/KernelBench) KernelBench/level3/$f, unchanged"
        echo "# below these lines. MIT License, Copyright (c) 2023 Anne Ouyang, Simon Guo, Azalia Mirhoseini;"
        echo "# the full text is LICENSE in this folder."
        git --git-dir="$1" show "HEAD:KernelBench/level3/$f"
    } > "$here/$f"
done
