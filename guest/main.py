# SPDX-License-Identifier: MIT
# PyBox's runner of a cold box's program of PYBOX_GUEST_WHOLE_MIN bytes or more
# (guest/proto.h): the box's init then starts the interpreter as
#     /usr/bin/python3 -I -u -c <this file>
# and feeds the program on its stdin. It runs the program as `python3 -I -u -` runs a
# smaller one, but reads it whole in a few reads: with -u the interpreter reads its
# program from stdin one byte per system call (0.19 ms a KB in a box here). It leaves
# nothing of itself in the program's main module. Contract: docs/guest-protocol.md.
def _pybox_main():
    import sys

    main = sys.modules["__main__"].__dict__
    del main["_pybox_main"]
    sys.argv[:] = ["-"]
    sys.orig_argv[sys.orig_argv.index("-c") :] = ["-"]
    src = sys.stdin.buffer.read()
    main["__file__"] = "<stdin>"
    main["__cached__"] = None
    try:
        code = compile(src, "<stdin>", "exec", dont_inherit=True)
        del src
        exec(code, main)
    except SystemExit:
        raise  # the interpreter ends as it would: its status, its message
    except BaseException as e:
        # Printed as the interpreter prints an uncaught exception of the main module:
        # without this runner's frames.
        tb = e.__traceback__
        own = sys._getframe().f_code.co_filename
        while tb is not None and tb.tb_frame.f_code.co_filename == own:
            tb = tb.tb_next
        e = e.with_traceback(tb)
        sys.last_type, sys.last_value, sys.last_traceback = type(e), e, tb
        sys.excepthook(type(e), e, tb)
        main.pop("__file__", None)
        main.pop("__cached__", None)
        if isinstance(e, KeyboardInterrupt):
            # The interpreter ends by SIGINT after its shutdown, as for `-`; said once.
            sys.excepthook = lambda *a: None
            raise
        raise SystemExit(1) from None
    main.pop("__file__", None)
    main.pop("__cached__", None)


_pybox_main()
