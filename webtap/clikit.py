"""The command-line contract that webtap, httpanalyzer and urlfilter share (docs/CLI.md).

Every tool's `main` is `clikit.main(TOOL, parser, handler, argv)`; the handler gets the parsed
arguments and a :class:`Run`, and opens its outputs with ``run.output(path, ...)``. What the
layer guarantees, so that no tool has to remember it:

- **Atomic outputs.** An :class:`Output` writes into a temporary file *in the target's folder*
  (``.NAME.XXXXXXXX.tmp``) and renames it into place only in :meth:`Output.commit`. A run that
  fails leaves an earlier file as it was and no temporary behind. A run stopped by SIGINT or
  SIGTERM keeps the records it had: they are written, complete and valid, to ``NAME.partial.EXT``
  beside the target (never over it) and marked partial (Parquet key-value metadata
  ``webtap.partial = true``). A directory output (the Dask dataset) is a temporary folder
  renamed at the end.
- **One error path.** :class:`UsageError` (and argparse's own errors, libpcap's BpfError): one line
  ``tool: error: what, where`` and exit 2. :class:`RunError`, a trace that cannot be read, an OS
  error: one line and exit 1. Anything unexpected: one line naming the exception and exit 1. A
  traceback only with ``--debug`` or ``WEBTAP_DEBUG=1`` in the environment. A closed stdout
  (``| head``) ends the run quietly with exit 0.
- **Signals.** SIGINT and SIGTERM raise :class:`Interrupted` in the main thread (so a blocked
  read of a FIFO or a slow gzip stream ends at once); the run ends with exit 130 / 143 and one
  line ``tool: interrupted by SIGINT after N packets``. A write in progress is finished first
  (``with run.shielded():``); a signal that arrives then sets the run context's stop_requested
  (webtap.runctx, active for the run), and the reader ends its input at its next batch. Live
  captures (``-i``) end normally on a signal: exit 0.
- **Warnings.** ``run.warn(...)`` prints ``tool: warning: ...`` and ``run.note(...)`` an
  informational line (``wrote ...``, a summary) unless ``--quiet``.
- **Outputs over inputs.** :func:`files` declares which arguments of a parser are inputs and
  outputs; before the handler runs, an output that resolves to an input or to another output
  (same inode, a symlink, ``-`` twice) is a usage error (:func:`check_files`).

The extension table
-------------------
:data:`OUTPUTS` maps an output file's extension to its format, one row each::

    ".csv": Format("csv", "webtap.csvsink:CsvWriter", stream=True, help="CSV with a header row"),

- the key: the extension, lower case, with its dot; a name without one of these is a usage error;
- ``name``: the format's name, also the key of a tool's *view* for it (below);
- ``writer``: ``"module:Class"``, imported only when that format is chosen (pyarrow and friends
  are not loaded for a run that does not need them);
- ``stream``: whether ``-o -`` (stdout) may use it (a format with a footer, Parquet, may not);
- ``help``: a few words for ``--help`` and docs/CLI.md;
- ``empty``: whether an output of the format without records and without a schema is an empty
  file (the text formats: lines, CSV, JSON lines, Zeek). Such an output builds no writer, so a
  run that ends before its first record (a header-only trace) never loads the writer's module
  nor pyarrow (start-up, issue 29); Parquet (a footer, a schema) always builds its writer.

A writer class is built as ``Class(fileobj, schema=SCHEMA_OR_NONE)`` on a binary file object, and
has ``write(batch)`` (a pyarrow RecordBatch or Table, already passed through the tool's view for
that format, if any) and ``close(meta)`` (finish the file; ``meta`` is a dict of str -> str the
format may store, e.g. ``{"webtap.partial": "true"}``; it must not close the file object). A tool
adapts its records to a format with ``views={"csv": fn, "lines": fn}`` (fn: batch -> batch),
e.g. httpanalyzer's timestamps as decimal seconds for CSV and its 13 paper fields for lines.
Adding a format is one row here and one class.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import stat
import sys
import threading
import time

from webtap.errors import BpfError, CaptureError, NotACapture

__all__ = ["Format", "OUTPUTS", "Output", "Run", "UsageError", "RunError", "Exit", "Interrupted",
           "what_where", "describe",
           "main", "DEBUG_ENV", "add_gc_timeout", "progress_wanted", "number", "positive_int",
           "positive_float",
           "nonneg_int", "gc_timeout", "max_pending", "files", "check_files", "trace_path",
           "output_help", "add_common"]

#: Set to 1 for a traceback after an error (as --debug does).
DEBUG_ENV = "WEBTAP_DEBUG"


class Format:
    """One row of OUTPUTS (a plain class: dataclasses would import inspect at start-up)."""

    __slots__ = ("name", "writer", "stream", "help", "empty")

    def __init__(self, name: str, writer: str, stream: bool, help: str, empty: bool = False):
        self.name, self.writer, self.stream, self.help = name, writer, stream, help
        self.empty = empty

    def __repr__(self) -> str:
        return (f"Format({self.name!r}, {self.writer!r}, stream={self.stream}, help={self.help!r}, "
                f"empty={self.empty})")


#: Output file extension -> format (see the module docstring for the row format).
OUTPUTS: dict[str, Format] = {
    ".txt": Format("lines", "webtap.writers:LineWriter", stream=True,
                   help="one record per line, fields separated by |, escaped (docs/CLI.md)",
                   empty=True),
    ".csv": Format("csv", "webtap.csvsink:CsvWriter", stream=True, help="CSV with a header row",
                   empty=True),
    ".parquet": Format("parquet", "webtap.parquetsink:ParquetWriter", stream=False,
                       help="Parquet (zstd), Arrow types"),
    ".pq": Format("parquet", "webtap.parquetsink:ParquetWriter", stream=False,
                  help="Parquet (zstd), Arrow types"),
    ".jsonl": Format("jsonl", "webtap.jsonl:JsonLinesWriter", stream=True,
                     help="JSON lines, one object per record (types: webtap/jsonl.py)",
                     empty=True),
    ".log": Format("zeek", "webtap.zeeklog:ZeekLogWriter", stream=True,
                   help="Zeek ASCII log (http.log layout for HTTP records)", empty=True),
}


from webtap import runctx  # noqa: E402
from webtap.errors import WebtapError  # noqa: E402


class UsageError(WebtapError):
    """A bad option, argument or output path: one line, exit 2."""


class RunError(WebtapError):
    """The run could not do its job (nothing readable, a tool it needs failed): one line, exit 1."""


class Exit(WebtapError):
    """End the run with this exit code; what went wrong was already said on stderr."""

    def __init__(self, code: int = 1):
        super().__init__(code)
        self.code = code


def what_where(entry: str) -> str:
    """'PATH: reason' (webtap.stream's unreadable list) as the contract's 'reason, PATH'."""
    where, sep, what = entry.partition(": ")
    if not (sep and what):
        return entry
    if what.startswith(where + ": "):          # the reason named the file again
        what = what[len(where) + 2:]
    return f"{what}, {where}"


def per_trace(warnings) -> list[str]:
    """The warnings of a run ('PATH: what' each), one line per trace: 'PATH: what; what'."""
    by: dict[str, list[str]] = {}
    for w in warnings:
        where, sep, what = str(w).partition(": ")
        if sep:
            by.setdefault(where, []).append(what)
        else:
            by.setdefault("", []).append(str(w))
    return [(f"{k}: " if k else "") + "; ".join(v) for k, v in by.items()]


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; .signum says which."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def output_help(what: str = "records", formats=None) -> str:
    """Help text for -o: the extensions the table (or the subset `formats`) accepts."""
    exts = [e for e, f in OUTPUTS.items() if formats is None or f.name in formats]
    return (f"write the {what} to OUT, the format by its extension ({', '.join(exts)}); "
            "'-' for stdout (text formats); replaced only when the run succeeds")


# -- argument types (a bad number is a usage error, exit 2, from argparse) ----------------------

def _fmt(v) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        v = int(v)
    return f"{v:,}".replace(",", "_") if isinstance(v, int) and abs(v) >= 100_000 else str(v)


def number(kind, lo, hi, *, lo_open: bool = False, what: str | None = None):
    """An argparse type for a number in a range: `kind(text)` (int or float) with
    lo <= v <= hi (lo < v with lo_open); NaN and inf refused. Anything else is a usage error
    (exit 2) that names the range: ``must be in 1 .. 1_073_741_824: '99999999999999999999'``.
    Every numeric option of every command goes through this (docs/CLI.md lists the ranges), so
    that a number the C core cannot hold never reaches it."""
    what = what or ("an integer" if kind is int else "a number")
    bound = (f"> {_fmt(lo)} and <= {_fmt(hi)}" if lo_open else f"in {_fmt(lo)} .. {_fmt(hi)}")

    def parse(text: str):
        try:
            v = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if v != v or v in (float("inf"), float("-inf")) or \
                not ((lo < v) if lo_open else (lo <= v)) or not v <= hi:
            raise argparse.ArgumentTypeError(f"must be {bound}: {text!r}")
        return v
    parse.__name__ = kind.__name__          # argparse's "invalid <name> value" wording
    parse.range = (lo, hi, lo_open)
    return parse


#: the largest time in seconds an option takes (about 31 years: as ns it fits an int64 many times)
MAX_SECONDS = 1e9
#: a finite number > 0 and <= 1e9 (seconds, MiB, microseconds)
positive_float = number(float, 0, MAX_SECONDS, lo_open=True)
#: an integer in 1 .. 2**62
positive_int = number(int, 1, 1 << 62)
#: an integer in 0 .. 2**62
nonneg_int = number(int, 0, 1 << 62)
#: --gc-timeout: seconds of capture time, > 0 and <= 1e9
gc_timeout = number(float, 0, MAX_SECONDS, lo_open=True)
#: --max-pending of the pairing and TLS tables (their C tables index with int32)
max_pending = number(int, 1, 1 << 30)


# -- outputs over inputs ---------------------------------------------------------------------

_FILES = "_webtap_files"


def _terminal_columns() -> int:
    """shutil.get_terminal_size().columns, as argparse's help formatter asks for it: $COLUMNS
    when a positive number, else the terminal of sys.__stdout__, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's RawDescriptionHelpFormatter with the same width (the terminal's, less 2), found
    without `import shutil`: argparse builds a formatter for every add_argument and, given no
    width, imports shutil (and with it bz2, lzma and zlib) for get_terminal_size: ~1 ms of every
    command's start-up (issue 29). The commands' parsers use it (formatter_class=)."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        if width is None:
            width = _terminal_columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)


def files(parser: argparse.ArgumentParser, inputs=(), outputs=()) -> None:
    """Declare which arguments of `parser` (by dest) name files the command reads (`inputs`)
    and writes (`outputs`; a dict dest -> what None means, e.g. {"output": "-"} when no -o is
    stdout). Before the handler runs, :func:`check_files` refuses (usage error, exit 2) an
    output that is an input or another output of the same run."""
    if not isinstance(outputs, dict):
        outputs = {d: None for d in outputs}

    def label(dest):
        for a in parser._actions:
            if a.dest == dest:
                if a.option_strings:
                    return max(a.option_strings, key=len)
                return a.metavar or dest.upper()
        return dest
    parser.set_defaults(**{_FILES: ([(d, label(d)) for d in inputs],
                                    [(d, label(d), none) for d, none in outputs.items()])})


def _values(v) -> list:
    if v is None:
        return []
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _identity(path: str) -> set:
    """What a path resolves to: its inode when it exists (symlinks and hard links followed),
    else the real path of where it would be made. '-' as an output: stdout, and the file stdout
    was redirected to (`> x.txt`), if a regular file."""
    if path == "-":
        ids = {("stdout",)}
        try:
            st = os.fstat(sys.stdout.fileno())
            if stat.S_ISREG(st.st_mode):
                ids.add(("inode", st.st_dev, st.st_ino))
        except (OSError, ValueError, AttributeError):
            pass
        return ids
    try:
        st = os.stat(path)
        return {("inode", st.st_dev, st.st_ino)}
    except (OSError, ValueError):
        return {("path", os.path.realpath(path))}


def check_files(args) -> None:
    """Usage error if an output of this run resolves to one of its inputs or to another of its
    outputs (same inode, a symlink to it, '-' twice for stdout); nothing has been read yet."""
    decl = getattr(args, _FILES, None)
    if not decl:
        return
    ins, outs = decl
    seen = []                          # (identity, label, path) of inputs
    for dest, lab in ins:
        for p in _values(getattr(args, dest, None)):
            seen.append((_identity("/dev/stdin" if p == "-" else p), lab, p))
    done = []                          # (identity, label, path) of outputs
    for dest, lab, none in outs:
        vals = _values(getattr(args, dest, None)) or _values(none)
        for p in vals:
            ident = _identity(p)
            for other, olab, op in done:
                if other & ident:
                    where = "stdout" if p == "-" else p
                    raise UsageError(f"{lab} and {olab} are the same output, {where}")
            if p != "-":
                for other, ilab, ip in seen:
                    if other & ident:
                        raise UsageError(f"output {lab} would overwrite the input {ilab} {ip}, {p}")
            done.append((ident, lab, p))


def trace_path(path: str) -> str:
    """A trace argument: '-' is standard input."""
    return "/dev/stdin" if path == "-" else path


def progress_wanted(flag, records_to_stdout: bool, quiet: bool = False) -> bool:
    """Whether to draw a progress bar on stderr: as asked (--progress / --no-progress), else
    when stderr is a terminal, unless the records go to the same terminal (the bar would land
    between them) or --quiet."""
    if flag is not None:
        return bool(flag)
    if quiet or not sys.stderr.isatty():
        return False
    return not (records_to_stdout and sys.stdout.isatty())


def add_gc_timeout(p: argparse.ArgumentParser, what: str) -> None:
    """--gc-timeout, the same on every command that pairs: seconds of capture time `what`
    waits for its counterpart (the range is gc_timeout's)."""
    p.add_argument("--gc-timeout", type=gc_timeout, default=60.0, metavar="S",
                   help=f"seconds of capture time {what} waits for its counterpart "
                        "(> 0 and <= 1e9; default 60)")


def add_common(p: argparse.ArgumentParser, quiet: bool = True) -> None:
    """--debug and --quiet, the same on every command."""
    p.add_argument("--debug", action="store_true",
                   help=f"show a Python traceback after an error (also: {DEBUG_ENV}=1)")
    if quiet:
        p.add_argument("-q", "--quiet", action="store_true",
                       help="no warnings about damaged input on stderr (errors are still shown)")


# -- outputs --------------------------------------------------------------------------------------

def _load(spec: str):
    mod, _, name = spec.partition(":")
    return getattr(importlib.import_module(mod), name)


def _remove_tree(path: str) -> None:
    """Remove a folder output (a temporary dataset, or the folder it replaces) and what it holds,
    as shutil.rmtree(path, ignore_errors=True) does: bottom-up through directory descriptors
    (os.fwalk: a symlink is removed, never followed), an entry that cannot be removed is left.
    Not shutil itself: it imports bz2, lzma and zlib at its top (~1 ms of every command's
    start-up, issue 29) for this one call of the rare folder outputs."""
    try:
        for _, dirs, files, fd in os.fwalk(path, topdown=False):
            for name in files:
                try:
                    os.unlink(name, dir_fd=fd)
                except OSError:
                    pass
            for name in dirs:
                try:
                    os.rmdir(name, dir_fd=fd)
                except NotADirectoryError:     # a symlink to a folder: the link itself
                    try:
                        os.unlink(name, dir_fd=fd)
                    except OSError:
                        pass
                except OSError:
                    pass
        os.rmdir(path)
    except OSError:                            # gone already, or left (as ignore_errors)
        pass


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def _partial_name(path: str) -> str:
    root, ext = os.path.splitext(path)
    return f"{root}.partial{ext}"


class Output:
    """One output of a run, written atomically (module docstring). Check the path at once
    (``Run.output`` builds it before any input is read), write with :meth:`write`, then
    :meth:`commit`; anything not committed is discarded when the run ends."""

    def __init__(self, run: "Run", path: str, *, schema=None, views=None, formats=None,
                 directory: bool = False, raw: bool = False):
        self.run = run
        self.raw = raw                     # a file another module writes at self.tmp
        self.path = path
        self.schema = schema
        self.views = views or {}
        self.directory = directory
        self.stdout = path == "-"
        self._writer = None
        self._f = None
        self.tmp: str | None = None
        self.done = False
        self.rows = 0
        ext = os.path.splitext(path)[1].lower()
        if not self.stdout and not directory and os.path.isdir(path):
            raise UsageError(f"output is a directory, {path}")
        if raw:
            if self.stdout:
                raise UsageError("this output cannot be stdout, -")
            self.format = None
            self._check_target()
            self._make_temp()
            self._f.close()
            self._f = None
            return
        if directory:
            self.format = OUTPUTS.get(ext)
            if self.format is None or self.format.name != "parquet":
                raise UsageError(f"a dataset output must end in .parquet, {path}")
        elif self.stdout:
            self.format = next(f for f in OUTPUTS.values() if f.name == "lines")
        else:
            self.format = OUTPUTS.get(ext)
            if self.format is None:
                known = ", ".join(e for e, f in OUTPUTS.items()
                                  if formats is None or f.name in formats)
                what = f"unknown output format {ext!r}" if ext else "output name has no extension"
                raise UsageError(f"{what} (use {known}), {path}")
        if formats is not None and self.format.name not in formats:
            raise UsageError(f"this command cannot write {self.format.name}, {path}")
        if self.stdout and not self.format.stream:
            raise UsageError(f"{self.format.name} cannot be written to stdout, -")
        if not self.stdout:
            self._check_target()
            self._make_temp()

    def _check_target(self) -> None:
        p = self.path
        folder = os.path.dirname(os.path.abspath(p))
        if os.path.isdir(p) and not self.directory:
            raise UsageError(f"output is a directory, {p}")
        if not os.path.isdir(folder):
            raise UsageError(f"output folder does not exist, {os.path.dirname(p) or '.'}")

    def _make_temp(self) -> None:
        folder, name = os.path.split(os.path.abspath(self.path))
        for _ in range(100):
            tmp = os.path.join(folder, f".{name}.{os.urandom(4).hex()}.tmp")
            try:
                if self.directory:
                    os.mkdir(tmp, 0o777)
                else:
                    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
            except OSError as e:
                raise UsageError(f"cannot write the output folder ({e.strerror}), "
                                 f"{os.path.dirname(self.path) or '.'}") from None
            self.tmp = tmp
            self.run._temps.add(tmp)
            if not self.directory:
                self._f = os.fdopen(fd, "wb")
            return
        raise UsageError(f"cannot make a temporary file beside {self.path}")

    @property
    def target(self) -> str:
        """Where another writer puts its file or dataset (the temporary file or folder)."""
        return self.tmp

    def _open_writer(self):
        cls = _load(self.format.writer)
        f = sys.stdout.buffer if self.stdout else self._f
        self._writer = cls(f, schema=self.schema)

    def write(self, batch) -> None:
        """Write a pyarrow RecordBatch or Table (through the tool's view for this format). A
        signal that arrives meanwhile takes effect once the batch is written."""
        view = self.views.get(self.format.name)
        with self.run.shielded():
            if self._writer is None:
                self._open_writer()
            self._writer.write(view(batch) if view else batch)
            self.rows += batch.num_rows
            if self.stdout:                # a pipe reader sees the records as they come
                sys.stdout.buffer.flush()
        # a signal that came meanwhile is not raised here: the reader ends its input at its next
        # batch (the run context's stop_requested), what waits is flushed, and commit() raises

    def flush(self) -> None:
        """Start writing what the output holds now, where its format can do it in the
        background (Parquet: a row group in the writer's thread; commit() waits for it): the
        run's other outputs are finished meanwhile. The other formats write as they go."""
        if self._writer is not None and hasattr(self._writer, "flush"):
            with self.run.shielded():
                self._writer.flush()

    def _finish(self, meta: dict) -> None:
        if self.directory or self.raw:
            return
        if self._writer is None and not (self.schema is None and self.format.empty):
            self._open_writer()
        if self._writer is not None:   # (else: no record, no schema: an empty file, no writer)
            self._writer.close(meta)
        if self.stdout:
            sys.stdout.flush()
        else:
            self._f.flush()
            os.fchmod(self._f.fileno(), 0o666 & ~_umask())
            self._f.close()
            self._f = None

    def _place(self, dest: str) -> None:
        if self.directory and os.path.lexists(dest):
            old = f"{self.tmp}.old"         # a directory cannot be renamed over a folder
            os.rename(dest, old)
            os.rename(self.tmp, dest)
            if os.path.isdir(old) and not os.path.islink(old):
                _remove_tree(old)
            else:
                os.unlink(old)
        else:
            os.replace(self.tmp, dest)
        self.run._temps.discard(self.tmp)
        self.tmp = None

    def commit(self, meta: dict | None = None) -> None:
        """Finish the file and put it in place (the run succeeded). If a signal arrived, the
        run did not succeed: Interrupted is raised instead (and the records so far are kept as
        NAME.partial.EXT)."""
        if self.done:
            return
        self.run.check()
        with self.run.shielded():
            self._finish({"webtap.tool": self.run.tool, "webtap.partial": "false", **(meta or {})})
            if not self.stdout:
                self._place(self.path)
            self.done = True

    def commit_partial(self, reason: str) -> str | None:
        """Interrupted: the records so far, complete and valid, in NAME.partial.EXT; returns
        that path (None for stdout, or when nothing could be kept)."""
        if self.done:
            return None
        if self.raw:                       # a file another module wrote: kept if it has rows
            if not self.rows or self.tmp is None:
                return None
            self.done = True
            dest = _partial_name(self.path)
            self._place(dest)
            return dest
        self._finish({"webtap.tool": self.run.tool, "webtap.partial": "true",
                      "webtap.interrupted_by": reason})
        self.done = True
        if self.stdout:
            return None
        dest = _partial_name(self.path)
        self._place(dest)
        return dest

    def discard(self) -> None:
        self.done = True
        if self._writer is not None and hasattr(self._writer, "wait"):
            try:
                self._writer.wait()        # a row group under way in the writer's thread
            except Exception:              # its file is thrown away: its error no longer matters
                pass
        if self._f is not None:
            try:
                self._f.close()
            except OSError:
                pass
            self._f = None
        if self.tmp is not None:
            if os.path.isdir(self.tmp):
                _remove_tree(self.tmp)
            else:
                try:
                    os.unlink(self.tmp)
                except FileNotFoundError:
                    pass
            self.run._temps.discard(self.tmp)
            self.tmp = None


# -- the run ----------------------------------------------------------------------------------

class Run:
    """What a command handler gets besides its arguments: outputs, warnings, signal state."""

    def __init__(self, tool: str):
        self.tool = tool
        self.debug = bool(os.environ.get(DEBUG_ENV, "").strip() not in ("", "0"))
        self.quiet = False
        self.live = False                  # a signal ends a live capture normally (exit 0)
        self._live_stop = False            # the first signal of a live run was taken as a stop
        self.signum: int | None = None
        self.outputs: list[Output] = []
        self._temps: set[str] = set()
        self._shield = 0
        self._raised = False
        self.forward = True                # False while a live loop handles signals itself
        self.packets = None                # callable -> packets read so far (for messages)
        self.ctx = runctx.RunContext()     # this run's state, shared with its readers
        self._on_interrupt: list = []      # callables run before the partial outputs are kept

    def on_interrupt(self, fn) -> None:
        """Run `fn()` when the run is interrupted, before the outputs are kept as
        NAME.partial.EXT: a stage that holds its records until the end (TLS handshakes, the
        forged frames) writes what it has there (a failing hook is ignored)."""
        self._on_interrupt.append(fn)

    # outputs
    def output(self, path: str | None, **kw) -> Output | None:
        if path is None:
            return None
        o = Output(self, path, **kw)
        self.outputs.append(o)
        return o

    # messages
    def warn_traces(self, warnings) -> None:
        """One warning line per trace that lost anything (webtap.stream.Totals.warnings)."""
        for line in per_trace(warnings):
            self.warn(line)

    def warn(self, msg: str) -> None:
        if not self.quiet:
            print(f"{self.tool}: warning: {msg}", file=sys.stderr, flush=True)

    def note(self, msg: str) -> None:
        """An informational line on stderr (files written, counts), unless --quiet."""
        if not self.quiet:
            self.say(msg)

    def say(self, msg: str) -> None:
        """A line on stderr even with --quiet (a live capture's readiness line, which scripts
        wait for)."""
        print(f"{self.tool}: {msg}", file=sys.stderr, flush=True)

    def on_ready(self, iface: str, how: str | None = None):
        """The on_ready callback of a live capture: prints its readiness line on stderr, as
        tcpdump does ('TOOL: listening on IFACE, link-type ...'), once every packet from then on
        is kept (after libpcap installed the filter, which flushes the kernel's ring). Called with
        the LiveCapture, or with None by a fanout capture (then `how` says what listens)."""
        def ready(cap=None) -> None:
            self.say(cap.describe() if cap is not None else
                      f"listening on {iface}" + (f", {how}" if how else ""))
        return ready

    def error(self, msg: str) -> None:
        print(f"{self.tool}: error: {msg}", file=sys.stderr, flush=True)

    # signals
    def _on_signal(self, signum, frame) -> None:
        if self.signum is None:
            self.signum = signum
        self.ctx.stop_requested = True             # readers end their input at the next batch
        if self.live:
            # A live capture is not cut where it stands: its reader sees stop_requested at
            # its next read (within the read timeout), keeps what the kernel already holds
            # (a bounded drain) and ends the input; the run then ends normally. Every signal
            # of a live run only asks for that stop: the watcher thread resends a signal to
            # the main thread, and its copies cannot be told from a second Ctrl-C.
            self._live_stop = True
            return
        if self._shield == 0 and not self._raised:
            self._raised = True                    # once: a forwarded copy must not raise again
            raise Interrupted(signum)

    class _Shield:
        def __init__(self, run):
            self.run = run

        def __enter__(self):
            self.run._shield += 1

        def __exit__(self, *exc):
            self.run._shield -= 1

    def shielded(self):
        """A block a signal does not cut short (it takes effect at the next check())."""
        return Run._Shield(self)

    def check(self) -> None:
        """Raise Interrupted if a signal arrived (something may have swallowed it)."""
        if self.signum is not None and self._shield == 0:
            self._raised = True
            raise Interrupted(self.signum)

    @property
    def stopped_by(self) -> str | None:
        return signal.Signals(self.signum).name if self.signum else None

    def packets_read(self) -> int:
        if self.packets is not None:
            try:
                return int(self.packets())
            except Exception:      # noqa: BLE001 - a count for a message, never fatal
                pass
        return self.ctx.packets


def describe(exc: BaseException) -> str:
    """One line for an exception: 'what, where' when the exception knows where."""
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename if exc.filename is not None else None
        return f"{exc.strerror}, {where}" if where else exc.strerror
    text = str(exc).strip().replace("\n", " ") or type(exc).__name__
    parts = text.split(": ")
    out = [q for i, q in enumerate(parts) if i == 0 or q != parts[i - 1]]   # "X: X" -> "X"
    return ": ".join(out)


def _quiet_stdout() -> None:
    """stdout was closed by the reader (`| head`): send the rest to /dev/null, quietly."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:
        pass


def main(tool: str, parser: argparse.ArgumentParser, handler, argv=None) -> int:
    """Parse, run `handler(args, run)`, and turn every way of ending into the contract's exit
    code and stderr line. Returns the exit code."""
    run = Run(tool)
    old = {s: signal.signal(s, run._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    fwd = _Forwarder(run)
    try:
        with runctx.activate(run.ctx):         # the readers take this run's context
            return _main(run, parser, handler, argv)
    finally:
        fwd.close()
        for s, h in old.items():
            signal.signal(s, h)


def _child_defaults() -> None:
    """In a child forked during a run (the feeder's consumers): signals as Python's defaults,
    and no wakeup fd shared with the parent (its watcher would forward the child's SIGTERM)."""
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:
        pass
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        pass


_AT_FORK = []


class _Forwarder:
    """The kernel gives a process-directed signal to any thread that does not block it: with
    pyarrow's or numpy's threads around, often not the main one. Python then runs the handler
    only when the main thread next executes bytecode, which a read blocked on a FIFO or a quiet
    interface never does. So the C-level handler's wakeup byte (signal.set_wakeup_fd) is read
    here, in a thread of ours, and the signal sent again to the main thread (pthread_kill): its
    read returns EINTR and the handler runs. Sent again until the main thread raised (or a
    reader ended its input on the run context's stop_requested)."""

    def __init__(self, run: Run):
        self.w = None
        if threading.current_thread() is not threading.main_thread():
            return
        r, w = os.pipe()
        os.set_blocking(w, False)
        try:
            self.old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except ValueError:
            os.close(r)
            os.close(w)
            return
        self.r, self.w = r, w
        # held while a copy is sent, and by close(): once close() returned, no copy is sent
        # any more. Without it a copy decided on before close() could land after main()
        # restored the default handlers, and the run died by the signal (-15) instead of
        # exiting 143 (seen under load in tests/cli test_signal_during_consumer_start_up)
        self.lock = threading.Lock()
        main_id = threading.main_thread().ident
        if not _AT_FORK:
            os.register_at_fork(after_in_child=_child_defaults)
            _AT_FORK.append(True)

        def delivered() -> bool:
            # a live run took its stop (its reads wait at most the read timeout: no resend)
            return run._raised or run._live_stop or run.ctx.stop_delivered

        def watch():
            while True:
                try:
                    data = os.read(r, 64)
                except OSError:
                    return
                if not data:
                    return
                for sig in data:
                    if sig not in (signal.SIGINT, signal.SIGTERM):
                        continue
                    # again until the main thread acted on it: a copy that lands just before
                    # it enters a blocking read is not seen until the read returns
                    while True:
                        with self.lock:
                            if delivered() or self.w is None or not run.forward:
                                break
                            try:
                                signal.pthread_kill(main_id, sig)
                            except (OSError, ValueError):
                                return
                        time.sleep(0.2)

        threading.Thread(target=watch, name="webtap-signals", daemon=True).start()

    def close(self) -> None:
        if self.w is None:
            return
        with self.lock:                    # a copy being sent is sent before this returns
            w, self.w = self.w, None
        try:
            signal.set_wakeup_fd(self.old)
        except ValueError:
            pass
        os.close(w)                        # the watcher reads EOF and ends


def _main(run: Run, parser, handler, argv) -> int:
    tool = run.tool
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:            # argparse: usage line + message, exit 2 (or --help: 0)
            return int(e.code or 0)
        run.debug = run.debug or bool(getattr(args, "debug", False))
        run.quiet = bool(getattr(args, "quiet", False))
        check_files(args)                  # an output over an input: refused before any read
        rc = handler(args, run)
        run.check()
        for o in run.outputs:
            if not o.done:
                o.discard()
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _quiet_stdout()
        return int(rc or 0)
    except Interrupted as e:
        return _interrupted(run, e.signum)
    except KeyboardInterrupt:
        return _interrupted(run, run.signum or signal.SIGINT)
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except Exit as e:
        _tb(run)
        return e.code
    except (UsageError, BpfError) as e:
        _tb(run)
        run.error(describe(e))
        return 2
    except (RunError, NotACapture, CaptureError, OSError) as e:
        _tb(run)
        run.error(describe(e))
        return 1
    except Exception as e:                 # noqa: BLE001 - one line, never a traceback
        _tb(run)
        hint = "" if run.debug else f" (run with --debug or {DEBUG_ENV}=1 for details)"
        run.error(f"{type(e).__name__}: {describe(e)}{hint}")
        return 1
    finally:
        for o in run.outputs:
            if not o.done:
                o.discard()
        for t in list(run._temps):
            try:
                os.unlink(t)
            except OSError:
                pass


def _tb(run: Run) -> None:
    # the interpreter's own printer (C): the same text as traceback.print_exc(), without loading
    # the traceback module into every run for --debug alone (start-up, issue 29)
    if run.debug:
        sys.__excepthook__(*sys.exc_info())


def _interrupted(run: Run, signum: int) -> int:
    # a second signal while the partial outputs are written is noted, not obeyed
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *a: None)
    run._raised = True
    name = signal.Signals(signum).name
    run.signum = signum
    for fn in run._on_interrupt:
        try:
            with run.shielded():
                fn()
        except Exception:                  # noqa: BLE001 - keep what the others have
            pass
    kept = []
    for o in run.outputs:
        if o.done:
            continue
        try:
            p = o.commit_partial(name) if o.rows or o.stdout else None
        except Exception:                  # noqa: BLE001 - keep nothing rather than fail here
            p = None
        if p is None:
            o.discard()
        else:
            kept.append(p)
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        _quiet_stdout()
    msg = f"interrupted by {name} after {run.packets_read()} packets"
    if kept:
        msg += "; records so far (marked partial) in " + ", ".join(kept)
    print(f"{run.tool}: {msg}", file=sys.stderr, flush=True)
    return 128 + signum
