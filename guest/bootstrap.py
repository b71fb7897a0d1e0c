# SPDX-License-Identifier: MIT
"""PyBox's interpreter bootstrap: /pybox/bootstrap.py in every image (read-only), started
by the box's init, never by the program, as

    /usr/bin/python3 -I -u /pybox/bootstrap.py warm <runner>|session

before any program exists. It imports the image's preload (/pybox/preload: one module a
line, '#' comments), with what those imports print kept apart, and says so on its channel
to init (descriptor 3, a unix SOCK_SEQPACKET socket): "ready " and a JSON report. Then:

warm     the program comes on stdin, whole, as a cold box's does; PyBox's runner (init
         gives its text, guest/main.py, which runs a large cold program too) runs it as
         the main module from "<stdin>", as `python3 -I -u -` runs it, and this process
         ends as that one would (its status, or SIGINT, is what init sees).
session  each call comes on the channel: "call K" with three descriptors (the call's
         program, stdout and stderr pipes); the code runs in the session's one main
         module, the value of a last expression is reported rather than printed, and
         "done K " and a JSON report go back. Everything this process says after a
         call's code ran is the agent's word as much as PyBox's: the host quotes it as
         untrusted.

Contract: docs/guest-protocol.md."""
import _signal
import os
import sys

# The bootstrap's own, before any program runs: a program may change the builtins, the
# functions of os and _signal, sys.modules (the interpreter keeps its own table, bound
# here), atexit's module (the functions registered are the interpreter's, whichever
# module object registered them; atexit is then left out of sys.modules, as a cold start
# has it).
from builtins import (BaseException, KeyboardInterrupt, SystemExit, compile, exec, getattr, int, issubclass, repr,
                      str, type)

import atexit

_run_exitfuncs = atexit._run_exitfuncs
del sys.modules["atexit"], atexit
_modules = sys.modules
_exit, _kill, _getpid, _write = os._exit, os.kill, os.getpid, os.write
_set_signal, SIGINT, SIG_DFL = _signal.signal, _signal.SIGINT, _signal.SIG_DFL
_OWN = __file__

CHANNEL = 3
PRELOAD = "/pybox/preload"
SAID_MAX = 2048
TEXT_MAX = 900


def _json_str(s):
    """A JSON string of s: ASCII only, without the json module (the program's
    sys.modules stays as a cold start leaves it)."""
    s = s.encode("ascii", "backslashreplace").decode("ascii")
    out = ['"']
    for ch in s:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _json(obj):
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, (int, float)):
        return repr(obj)
    if isinstance(obj, str):
        return _json_str(obj)
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(_json(x) for x in obj) + "]"
    return "{" + ",".join(_json_str(k) + ":" + _json(v) for k, v in obj.items()) + "}"


def _cut(s):
    return s if len(s) <= TEXT_MAX else s[:TEXT_MAX] + "..."


def _preload_names():
    try:
        with open(PRELOAD, "rb") as f:
            text = f.read(8192)
    except OSError:
        return []
    names = []
    for line in text.decode("ascii", "replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and all(part.isidentifier() for part in line.split(".")):
            names.append(line)
    return names


def _preload():
    """Import the image's preload; what the imports print goes to a memory file, counted,
    never to the box's streams."""
    import time

    names = _preload_names()
    report = {"preload": names, "imported": [], "failed": None, "ms": 0, "output_bytes": 0}
    if not names:
        return report
    saved = os.dup(1), os.dup(2)
    cap = os.memfd_create("pybox-preload", os.MFD_CLOEXEC)
    os.dup2(cap, 1)
    os.dup2(cap, 2)
    t0 = time.monotonic()
    try:
        for name in names:
            try:
                __import__(name)
            except BaseException as e:  # a preload that fails is reported, never used
                report["failed"] = _cut("%s: %s: %s" % (name, type(e).__name__, e))
                break
            report["imported"].append(name)
    finally:
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
    report["ms"] = round((time.monotonic() - t0) * 1000.0, 1)
    report["output_bytes"] = os.fstat(cap).st_size
    os.close(cap)
    return report


def _report_exception(e):
    """The traceback as the interpreter prints it for the main module: without this
    file's own frame."""
    tb = e.__traceback__
    if tb is not None and tb.tb_frame.f_code.co_filename == _report_exception.__code__.co_filename:
        e = e.with_traceback(tb.tb_next)
    sys.excepthook(type(e), e, e.__traceback__)


def _fresh_main():
    """A main module as `python3 -I -u -` gives the program one."""
    main = type(sys)("__main__")
    main.__dict__.update(  # in the order the interpreter's own main module has them
        __package__=None,
        __loader__=sys.modules["_frozen_importlib"].BuiltinImporter,
        __spec__=None,
        __annotations__={},
        __builtins__=sys.modules["builtins"],
        __file__="<stdin>",
        __cached__=None,
    )
    sys.modules["__main__"] = main
    sys.argv[:] = ["-"]
    return main


def _exit_code(e):
    """The status an uncaught SystemExit gives, as the interpreter gives it: its code
    (the exception itself when that cannot be had); none, 0; an int, its low byte (-1
    past a C long); anything else printed on stderr (the process's descriptor 2 when
    sys.stderr is missing or None), 1."""
    try:
        code = e.code
    except BaseException:
        code = e
    if code is None:
        return 0
    if issubclass(type(code), int):
        v = int.__int__(code)  # its value as an int, whatever its class makes of comparisons
        return (v if -(2**63) <= v < 2**63 else -1) & 0xFF
    err = sys.__dict__.get("stderr")
    try:
        if err is None:
            _write(2, (str(code) + "\n").encode("utf-8", "backslashreplace"))
        else:
            err.write(str(code))
            err.write("\n")
    except BaseException:
        pass
    return 1


def _unraisable(obj, e):
    """An exception the interpreter's own shutdown meets, said as its default hook for
    them says it: from the frame that raised it (not the bootstrap's), its type's line
    always with ": " and the exception's text."""
    err = sys.__dict__.get("stderr")
    if err is None:
        return
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == _OWN:
        tb = tb.tb_next
    t = type(e)
    try:
        try:
            what = repr(obj)
        except BaseException:
            what = "<object repr() failed>"
        err.write("Exception ignored in: %s\n" % what)
        if tb is not None:
            import traceback  # the program is over: nothing of it sees this import

            err.write("Traceback (most recent call last):\n")
            traceback.print_tb(tb, file=err)
        mod = getattr(t, "__module__", "<unknown>")
        try:
            text = str(e)
        except BaseException:
            text = "<exception str() failed>"
        prefix = "" if mod in ("builtins", "__main__") else "%s." % mod
        err.write("%s%s: %s\n" % (prefix, t.__qualname__, text))
    except BaseException:
        pass


def _flushed(names):
    """sys.stdout and sys.stderr (names: their names in sys) flushed as the interpreter's
    shutdown flushes them (a missing, None or closed one left alone): False when one
    failed."""
    ok = True
    for name in names:
        f = sys.__dict__.get(name)
        if f is None:
            continue
        try:
            closed = getattr(f, "closed")
        except BaseException:
            closed = False
        if closed:
            continue
        try:
            f.flush()
        except BaseException as e:
            if name.strip("_") == "stdout":
                _unraisable(f, e)
            ok = False
    return ok


def _finish(main, code):
    """The program's end as the interpreter's own shutdown makes it: its threads joined,
    its atexit functions run, the standard streams flushed, what its globals still hold
    dropped (a file it left open there is flushed and closed), the streams flushed again;
    a failure to flush ends it with 120. The interpreter then ends without tearing down
    the modules the image preloaded, which costs the data image a third of a second of
    CPU and tells the program nothing: with code, or (None) by SIGINT, as the interpreter
    ends after an uncaught KeyboardInterrupt."""
    threading = _modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException as e:
            _unraisable(threading, e)
    _run_exitfuncs()
    ok = _flushed(("stdout", "stderr"))
    main.__dict__.clear()
    # then the interpreter's own streams, which it puts back before it flushes them again
    ok = _flushed(("__stdout__", "__stderr__")) and ok
    if not ok and code is not None:
        code = 120
    if code is None:
        _set_signal(SIGINT, SIG_DFL)
        _kill(_getpid(), SIGINT)
        code = 128 + SIGINT  # the interpreter's own, should SIGINT not end it
    _exit(code)


def _compiler_ready():
    """The interpreter's first compile() builds the types of its syntax trees (about
    0.65 ms here), which the program's compile() below needs: done before the program
    comes, so its call does not wait for it. It imports no module."""
    compile("", "<stdin>", "exec", dont_inherit=True)


def warm(runner_text):
    """The runner is compiled before the program comes (its compile() builds the
    syntax-tree types the program's needs: _compiler_ready's work). It ends as the
    interpreter would end after it: a SystemExit (the program's own, or its status 1
    after an uncaught exception it has said), or a KeyboardInterrupt it has said, with
    its hook set so that the interpreter's call of it says nothing more."""
    runner = compile(runner_text, "<string>", "exec", dont_inherit=True)
    report = _preload()
    os.write(CHANNEL, b"ready " + _json(report).encode("ascii")[:SAID_MAX])
    os.close(CHANNEL)
    if report["failed"] is not None:
        os._exit(3)  # never used: the host removes the box
    main = _fresh_main()
    status = 0
    try:
        exec(runner, main.__dict__)
    except SystemExit as e:
        status = _exit_code(e)
    except KeyboardInterrupt as e:
        hook = sys.__dict__.get("excepthook")  # the runner's, which puts back the program's
        try:
            if hook is not None:
                hook(type(e), e, e.__traceback__)
        except BaseException:
            pass
        status = None
    del runner
    _finish(main, status)


def _recv_call(sock):
    import _socket

    data, anc, _flags, _addr = sock.recvmsg(64, _socket.CMSG_SPACE(3 * 4))
    fds = []
    for level, kind, blob in anc:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            for i in range(0, len(blob) - len(blob) % 4, 4):
                fds.append(int.from_bytes(blob[i : i + 4], sys.byteorder))
    return data, fds


def _read_all(fd):
    parts = []
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            return b"".join(parts)
        parts.append(b)


def _run_call(src, k, ns):
    import ast
    import linecache

    name = "<call %d>" % k
    report = {"call": k, "exception": None, "value": None}
    try:
        tree = compile(src, name, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        text = src.decode("utf-8", "replace")
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        code = compile(tree, name, "exec", dont_inherit=True)
        tail = compile(last, name, "eval", dont_inherit=True) if last is not None else None
    except (SyntaxError, ValueError) as e:
        sys.excepthook(type(e), e, None)
        report["exception"] = _cut("%s: %s" % (type(e).__name__, e))
        return report
    try:
        exec(code, ns)
        if tail is not None:
            value = eval(tail, ns)
            if value is not None:
                ns["_"] = value
                report["value"] = _cut(repr(value))
    except BaseException as e:  # the session goes on; SystemExit too
        _report_exception(e)
        report["exception"] = _cut("%s: %s" % (type(e).__name__, e))
    return report


def session():
    import _socket

    report = _preload()
    _compiler_ready()
    sock = _socket.socket(fileno=CHANNEL)
    sock.send(b"ready " + _json(report).encode("ascii")[:SAID_MAX])
    ns = _fresh_main().__dict__
    del ns["__file__"]
    null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    while True:
        data, fds = _recv_call(sock)
        if not data:
            os._exit(0)  # init is gone
        if not data.startswith(b"call ") or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            continue
        k = int(data[5:])
        prog, out, err = fds
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        src = _read_all(prog)
        os.close(prog)
        report = _run_call(src, k, ns)
        del src
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        # The call's pipes are let go before it is said done: what prints later goes
        # nowhere the host reads as this call's.
        os.dup2(null, 1)
        os.dup2(null, 2)
        sock.send(b"done %d " % k + _json(report).encode("ascii")[:SAID_MAX])


if __name__ == "__main__":
    if sys.argv[1:2] == ["warm"] and len(sys.argv) == 3:
        warm(sys.argv[2])
    elif sys.argv[1:] == ["session"]:
        session()
    else:
        sys.exit(2)
