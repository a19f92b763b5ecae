"""What the hint families build on, shared by several of them; none of it is a family, and none
of it imports one (hints/__init__.py has the rule). Its modules, each above what it imports:
calls; axis and expressions (on calls); binding; dataflow (on binding and expressions);
epilogue (on dataflow); operands, gemm and merge, apart from the others."""
