"""`trace_op`: one span per call of a sync or async function."""

import functools
import inspect

from .attrs import check_attributes, process_note
from .delivery import warn_limited
from .span import status_for
from .vocab import check_capture, check_non_negative, check_open_kind


def trace_op(resolve_run, fn=None, *, name=None, kind="function", step=None, rank=None,
             attributes=None, metrics=None, capture=None):
    """Decorates `fn` so each call is a span nested under the active span of the same
    run (a root when there is none). Return values pass through; exceptions are
    recorded as error spans and re-raised. `resolve_run()` gives the run at call time."""
    kind = check_open_kind(kind)
    try:
        run = resolve_run()
    except Exception:
        run = None
    attributes = check_attributes(attributes, run._note if run is not None else process_note)
    check_capture(capture)
    check_non_negative(step, "step")
    check_non_negative(rank, "rank")

    def decorate(fn):
        span_name = name or getattr(fn, "__qualname__", None) or repr(fn)
        signature = []

        def open_span(args, kwargs):
            try:
                run = resolve_run()
                if run is None or not run.tracing:
                    return None
                parent = run._current()
                effective = capture or (parent.capture if parent is not None else run.capture)
                inputs = None
                if effective == "preview":
                    inputs = _arguments(fn, signature, args, kwargs)
                make = parent.span if parent is not None else run.trace
                return make(span_name, kind, step=step, rank=rank, attributes=attributes,
                            inputs=inputs, capture=capture, metrics=metrics)
            except Exception as exc:  # the user's function runs whatever happens here
                warn_limited("internal", "could not open a span for %s: %r", span_name, exc)
                return None

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator_wrapper(*args, **kwargs):
                span = open_span(args, kwargs)
                if span is None:
                    return (yield from fn(*args, **kwargs))
                # The span covers the whole iteration but is not made current: between
                # yields the consumer's code runs, and must not nest under it.
                span.start()
                try:
                    result = yield from fn(*args, **kwargs)
                except BaseException as exc:
                    span.record_exception(exc)
                    span._close(status_for(type(exc)))
                    raise
                span._close("ok")
                return result

            return generator_wrapper

        if inspect.isasyncgenfunction(fn):
            @functools.wraps(fn)
            async def async_generator_wrapper(*args, **kwargs):
                span = open_span(args, kwargs)
                agen = fn(*args, **kwargs)
                if span is None:
                    async for item in agen:
                        yield item
                    return
                span.start()
                try:
                    async for item in agen:
                        yield item
                except BaseException as exc:
                    span.record_exception(exc)
                    span._close(status_for(type(exc)))
                    raise
                span._close("ok")

            return async_generator_wrapper

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                span = open_span(args, kwargs)
                if span is None:
                    return await fn(*args, **kwargs)
                with span:
                    result = await fn(*args, **kwargs)
                    _output(span, result)
                    return result

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            span = open_span(args, kwargs)
            if span is None:
                return fn(*args, **kwargs)
            with span:
                result = fn(*args, **kwargs)
                _output(span, result)
                return result

        return wrapper

    if fn is not None:
        return decorate(fn)
    return decorate


def _output(span, result):
    # The function may have recorded its span's output itself (tl.current_span()); its
    # own record wins over the return value.
    if not span._bodies & 2:
        span.set_output(result)


def _arguments(fn, cache, args, kwargs):
    """The call's arguments by parameter name, so secret-named ones are redacted."""
    try:
        if not cache:
            cache.append(inspect.signature(fn))
        bound = cache[0].bind_partial(*args, **kwargs).arguments
        params = list(bound)
        if params and params[0] in ("self", "cls"):
            bound = dict(bound)
            del bound[params[0]]
        return dict(bound)
    except (TypeError, ValueError):
        return {"args": list(args), "kwargs": kwargs}
