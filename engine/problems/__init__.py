from engine.problems.loader import ProblemError, builtin_names, load_problem
from engine.problems.problem import Problem, Size

__all__ = ["Problem", "ProblemError", "Size", "builtin_names", "load_problem"]
