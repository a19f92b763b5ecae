# Session 42, call 1 (tree ef147f4, any card): softmax's 40-evaluation search before (f712686) and
# after side by side, then 40-evaluation searches after only for sdpa, matvec, linear_relu_div and
# groupconv, packed after each (the call's limit cuts what does not fit).
EVALS=40 bash .gpu/h200.sh compare softmax
bash .gpu/h200.sh after40 sdpa matvec linear_relu_div groupconv
