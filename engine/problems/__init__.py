from engine.problems.loader import ProblemError, builtin_names, load_problem
from engine.problems.problem import PRECISION_POLICIES, Problem, Size

__all__ = ["PRECISION_POLICIES", "Problem", "ProblemError", "Size", "builtin_names", "load_problem"]
