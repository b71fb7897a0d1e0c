# SPDX-License-Identifier: MIT
# PyBox's runner of a cold box's program of PYBOX_GUEST_WHOLE_MIN bytes or more
# (guest/proto.h), and of every warm box's. For the first, the box's init starts the
# interpreter as
#     /usr/bin/python3 -I -u -c <this file>
# and feeds the program on its stdin; for the second, the bootstrap (guest/bootstrap.py,
# started as python3 -I -u /pybox/bootstrap.py warm <this file>) runs this file in a
# fresh main module once the program comes on its stdin. It runs the program as
# `python3 -I -u -` runs a smaller one, but reads it whole in a few reads: with -u the
# interpreter reads its program from stdin one byte per system call (0.19 ms a KB in a
# box here). It leaves nothing of itself in the program's main module. Contract:
# docs/guest-protocol.md.
def _pybox_main():
    # Everything the runner uses is its own before the program runs: the program shares
    # the main module's globals (and may change builtins), so no name of the runner is
    # looked up there afterwards.
    import sys
    from builtins import BaseException, KeyboardInterrupt, SystemExit, compile, exec, type

    show = sys.__excepthook__  # how the interpreter prints an exception itself
    # sys's own attributes set as the interpreter sets them: in its dictionary, past
    # whatever its module's class was made to do
    sysd = sys.__dict__
    traceback_of = BaseException.__traceback__.__get__
    with_traceback = BaseException.with_traceback
    own = sys._getframe().f_code.co_filename
    main = sys.modules["__main__"].__dict__
    del main["_pybox_main"]
    sys.argv[:] = ["-"]
    # init starts every interpreter as `python3 -I -u <what it runs>`: what it runs reads
    # as `-`, whichever way it came
    sys.orig_argv[3:] = ["-"]
    main["__file__"] = "<stdin>"
    main["__cached__"] = None

    def without_runner(e):
        tb = traceback_of(e)
        while tb is not None and tb.tb_frame.f_code.co_filename == own:
            tb = tb.tb_next
        with_traceback(e, tb)
        return tb

    e = None
    try:
        src = sys.stdin.buffer.read()
        code = compile(src, "<stdin>", "exec", dont_inherit=True)
        del src
        exec(code, main)
    except SystemExit:
        raise  # the interpreter ends as it would: its status, its message
    except BaseException as x:
        e = x
    if e is None:
        main.pop("__file__", None)
        main.pop("__cached__", None)
        return
    # An uncaught exception, out of the handler (the hook sees none being handled), said
    # as the interpreter says one of its main module's: without the runner's frames.
    tb = without_runner(e)
    t = type(e)
    sysd["last_type"], sysd["last_value"], sysd["last_traceback"] = t, e, tb
    hook = sysd.get("excepthook")
    if hook is None:
        sys.stderr.write("sys.excepthook is missing\n")
        show(t, e, tb)
    else:
        try:
            hook(t, e, tb)
        except SystemExit:
            raise
        except BaseException as x:
            xtb = without_runner(x)
            sys.stderr.write("Error in sys.excepthook:\n")
            show(type(x), x, xtb)
            sys.stderr.write("\nOriginal exception was:\n")
            show(t, e, tb)
    main.pop("__file__", None)
    main.pop("__cached__", None)
    if t is KeyboardInterrupt:
        # The interpreter ends by SIGINT after its shutdown, as for `-`: it is raised
        # again to the interpreter, which calls the hook once more; that call puts back
        # what the program had, so nothing is said twice and nothing of the runner stays.
        def quiet(*args):
            if hook is None:
                sysd.pop("excepthook", None)
            else:
                sysd["excepthook"] = hook
            with_traceback(e, tb)
            sysd["last_type"], sysd["last_value"], sysd["last_traceback"] = t, e, tb

        sysd["excepthook"] = quiet
        raise e
    raise SystemExit(1) from None


_pybox_main()
