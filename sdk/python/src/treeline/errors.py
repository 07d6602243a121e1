"""The SDK's own exceptions share one root, `TreelineError`, so a caller can catch them
as one family. The ones raised for a bad argument also keep the built-in class code
already catches them by (`except ValueError`), through multiple inheritance."""


class TreelineError(Exception):
    """The root of every exception the SDK raises on its own account."""


class InvalidValue(TreelineError, ValueError):
    """An argument of the right type with a value the SDK cannot use: an unknown kind
    or status, a URL with a path, a negative step, a kind setter on another kind."""


class InvalidType(TreelineError, TypeError):
    """An argument of the wrong type: a span name that is not a string, a step that
    is not an integer, the input given twice under two spellings."""
