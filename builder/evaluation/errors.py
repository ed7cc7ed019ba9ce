"""The one error evaluation raises for input it cannot use."""


class EvalError(RuntimeError):
    """Input that evaluation cannot use; the command line prints it without a traceback."""
