"""Code cells that free what IPython keeps, shared by the holders list (its fix) and the
Optimize card that offers them. Plain IPython and Python: they run without vramscope."""

FREE_TRACEBACK = (
    # IPython keeps the error in several places, and the frame that ran the cell holds
    # IPython's ExecutionResult, which holds the error: a cycle that only gc breaks, and
    # not while the result is still IPython's last one (during this very cell). Clearing
    # the frames frees their locals now, whoever still holds the error. A function frame
    # whose f_locals was read (the holder scan does) also keeps a dict copy of them,
    # which frame.clear() leaves: it is emptied first.
    "import inspect\n"
    "import sys\n"
    "import traceback\n\n"
    "_shell = get_ipython()\n"
    '_errors = [getattr(sys, "last_value", None), getattr(sys, "last_exc", None)]\n'
    '_errors.append(getattr(_shell.last_execution_result, "error_in_exec", None))\n'
    '_tracebacks = [getattr(sys, "last_traceback", None)]\n'
    '_tracebacks.append(getattr(_shell.InteractiveTB, "tb", None))\n'
    "_seen = set()\n"
    "while _errors:  # each error, the ones it was raised from or during included\n"
    "    _error = _errors.pop()\n"
    "    if isinstance(_error, BaseException) and id(_error) not in _seen:\n"
    "        _seen.add(id(_error))\n"
    "        _tracebacks.append(_error.__traceback__)\n"
    "        _errors += [_error.__cause__, _error.__context__]\n"
    "for _tb in _tracebacks:\n"
    "    while _tb is not None and _tb.tb_frame.f_globals is not _shell.user_ns:\n"
    "        _tb = _tb.tb_next  # IPython's own frames (run_code) are left as they are\n"
    "    _next = _tb\n"
    "    while _next is not None:\n"
    "        if _next.tb_frame.f_code.co_flags & inspect.CO_OPTIMIZED:  # a function's frame\n"
    "            if type(_next.tb_frame.f_locals) is dict:  # before Python 3.13: a copy\n"
    "                _next.tb_frame.f_locals.clear()\n"
    "        _next = _next.tb_next\n"
    "    traceback.clear_frames(_tb)  # the frames keep their locals alive\n"
    "sys.last_type = sys.last_value = sys.last_traceback = None\n"
    'if hasattr(sys, "last_exc"):\n'
    "    sys.last_exc = None\n"
    "_shell.InteractiveTB.tb = None\n"
    "_shell._last_traceback = None  # the formatted text ipykernel keeps\n"
    "del _shell, _errors, _tracebacks, _seen, _error, _tb, _next\n"
)
