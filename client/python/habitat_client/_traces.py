"""Reading trace files: habitat traces (raw or gzip) and torch.profiler JSON.

habitat-server accepts only habitat.v1.Trace messages. A torch.profiler
(Kineto) JSON trace is turned into one by the C++ importer (core/kineto),
on the client side: the `habitat` CLI does it for `habitat predict` and
`habitat import-kineto`. This package does not carry a second importer
(about 1,400 lines of C++ with its own tests); it runs that CLI when one is
available and otherwise refuses JSON with a message saying how to convert.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import zlib
from typing import List, Optional, Tuple

logger = logging.getLogger("habitat_client")

_GZIP_MAGIC = b"\x1f\x8b"
# The most a gzipped trace may inflate to by default: the server's default
# --max_message_mb; nothing larger could be sent.
MAX_TRACE_BYTES = 64 << 20
MAX_BATCH_SIZE = 1 << 30  # the CLI's bound on --batch-size
_KINETO_TIMEOUT_S = 600


class KinetoConversionError(ValueError):
    """A torch.profiler JSON trace could not be converted to a habitat trace:
    no `habitat` CLI to convert it with, or the CLI refused it."""


def _inflate_at_most(data: bytes, limit: int, source: str) -> bytes:
    """Inflates gzip `data` (every member), refusing it as soon as it exceeds
    `limit` bytes: a small file of zeros inflates a thousandfold, and must not
    take this process's memory first (the sidecar and the CLI bound theirs
    the same way, with common/file_io's Gunzip)."""
    out = bytearray()
    rest = data
    while rest[:2] == _GZIP_MAGIC:
        member = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        pending = rest
        try:
            while not member.eof:
                chunk = member.decompress(pending, limit + 1 - len(out))
                out += chunk
                if len(out) > limit:
                    raise ValueError(f"{source} inflates to more than {limit} bytes, more than "
                                     "the largest trace this client sends (max_message_mb)")
                pending = member.unconsumed_tail
                if not pending and not chunk:
                    break
        except zlib.error as e:
            raise ValueError(f"{source} is not valid gzip: {e}") from e
        if not member.eof:
            raise ValueError(f"{source} is not valid gzip: the data ends early")
        rest = member.unused_data
    if rest.strip(b"\0"):
        raise ValueError(f"{source} is not valid gzip: unexpected bytes after the data")
    return bytes(out)


def _raw_bytes(trace) -> Tuple[bytes, str]:
    """The bytes of `trace` as given (gzip or not) and a name for it in
    messages."""
    if isinstance(trace, (str, os.PathLike)):
        path = os.fspath(trace)
        try:
            with open(path, "rb") as f:
                return f.read(), f"trace file '{path}'"
        except OSError as e:
            raise ValueError(f"cannot read trace file '{path}': {e}") from e
    if isinstance(trace, (bytes, bytearray, memoryview)):
        return bytes(trace), "trace bytes"
    if hasattr(trace, "to_bytes") and not isinstance(trace, int):
        return trace.to_bytes(), "habitat_agent.Trace"
    if hasattr(trace, "SerializeToString"):
        return trace.SerializeToString(), "Trace message"
    raise TypeError("trace must be a path, bytes, a habitat_agent.Trace or a Trace message, "
                    f"not {type(trace).__name__}")


def _inflate(data: bytes, max_bytes: int, source: str) -> bytes:
    if data[:2] == _GZIP_MAGIC:
        data = _inflate_at_most(data, max_bytes, source)
    if not data.strip():
        raise ValueError(f"{source} is empty; expected a habitat trace (binary "
                         "habitat.v1.Trace) or a torch.profiler JSON trace")
    return data


def read_trace(trace, max_bytes: int = MAX_TRACE_BYTES) -> Tuple[bytes, str]:
    """The contents of `trace` (a path or bytes, gzip or not; a habitat_agent.Trace
    from the agent; a Trace message), inflated, and a name for it in
    messages. Gzip data that inflates to more than `max_bytes` is refused
    (ValueError) without being inflated further."""
    data, source = _raw_bytes(trace)
    return _inflate(data, max_bytes, source), source


def _starts_like_json(data: bytes) -> bool:
    """is_json on the start of `data`, inflating no more of gzip data than it
    takes to pass leading whitespace: a torch.profiler JSON trace may
    inflate to far more than the trace it converts to, so it is left to the
    importer, which bounds it at 1 GiB."""
    if data[:2] != _GZIP_MAGIC:
        return is_json(data)
    member = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    pending = data
    strip = _strip_bom  # only from the first bytes of the stream
    try:
        for _ in range(1024):  # at most 4 MiB of whitespace
            head = strip(member.decompress(pending, 4096)).lstrip()
            strip = bytes
            if head:
                return head[:1] in (b"{", b"[")
            if member.eof:
                pending = member.unused_data
                if pending[:2] != _GZIP_MAGIC:
                    return False
                member = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            else:
                pending = member.unconsumed_tail
                if not pending:
                    return False
    except zlib.error:
        return False  # read_trace says what is wrong with it
    return False


_UTF8_BOM = b"\xef\xbb\xbf"


def is_json(data: bytes) -> bool:
    """Whether `data` (inflated) is JSON rather than a binary habitat trace:
    a serialised Trace starts with a field tag, never with '{' or '[' or a
    UTF-8 byte order mark (which Windows editors write and JSON parsers may
    ignore, RFC 8259 8.1)."""
    return _strip_bom(data).lstrip()[:1] in (b"{", b"[")


def _strip_bom(data: bytes) -> bytes:
    """`data` without a leading byte order mark (as common/json_text.h)."""
    return data[len(_UTF8_BOM):] if data.startswith(_UTF8_BOM) else data


def find_habitat_cli(habitat_cli: Optional[str] = None) -> Optional[str]:
    """The `habitat` CLI to convert torch.profiler traces with: `habitat_cli`,
    else $HABITAT_CLI, else `habitat` on PATH; None when there is none."""
    candidate = habitat_cli or os.environ.get("HABITAT_CLI") or shutil.which("habitat")
    if not candidate:
        return None
    resolved = shutil.which(candidate) if os.sep not in candidate else candidate
    if resolved is None or not os.access(resolved, os.X_OK):
        raise KinetoConversionError(f"the habitat CLI '{candidate}' is not an executable file")
    return resolved


def convert_kineto(trace, batch_size: Optional[int] = None, model_name: Optional[str] = None,
                   precision: Optional[str] = None,
                   habitat_cli: Optional[str] = None) -> bytes:
    """Converts a torch.profiler (Kineto) JSON trace (a path or bytes, gzip
    or not) to a serialised habitat.v1.Trace with `habitat import-kineto`,
    the CLI's importer (see find_habitat_cli for which CLI runs). Raises
    KinetoConversionError without a CLI or when it refuses the trace."""
    data, source = _raw_bytes(trace)
    if not _starts_like_json(data):
        raise ValueError(f"{source} is not JSON, so not a torch.profiler trace")
    cli = find_habitat_cli(habitat_cli)
    if cli is None:
        raise KinetoConversionError(
            f"{source} is a torch.profiler (Kineto) JSON trace. habitat-server accepts only "
            "habitat traces (habitat.v1.Trace), and the JSON is converted by the C++ importer "
            "of the `habitat` CLI, which was not found: pass habitat_cli='/path/to/habitat' "
            "(or set $HABITAT_CLI, or put `habitat` on PATH), or convert first with "
            "`habitat import-kineto IN OUT.trace.gz` and predict OUT.trace.gz")
    with tempfile.TemporaryDirectory(prefix="habitat-kineto-") as tmp:
        if isinstance(trace, (str, os.PathLike)):
            json_path = os.fspath(trace)  # the CLI names the model after the file
        else:
            json_path = os.path.join(tmp, "trace.json")  # gzip or not: the CLI tells
            with open(json_path, "wb") as f:
                f.write(data)
        out_path = os.path.join(tmp, "converted.trace")
        command = [cli, "import-kineto", json_path, out_path]
        if batch_size is not None:
            command += ["--traced-batch-size", str(batch_size)]
        if model_name:
            command += ["--model", model_name]
        if precision:
            command += ["--precision", precision]
        try:
            run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, timeout=_KINETO_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise KinetoConversionError(f"cannot run `{cli} import-kineto` on {source}: {e}") \
                from e
        if run.returncode != 0:
            raise KinetoConversionError(
                f"`habitat import-kineto` ({cli}) refused {source} (exit {run.returncode}): "
                f"{run.stderr.strip() or run.stdout.strip()}")
        # What the importer inferred (batch size, precision from the layers'
        # inputs) is a guess the user should see.
        for note in _notes(run.stderr):
            logger.warning("%s: %s", source, note)
        with open(out_path, "rb") as f:
            return f.read()


def _notes(stderr: str) -> List[str]:
    """The CLI's notes, each one line again (it wraps them, the rest of a
    note indented)."""
    notes: List[str] = []
    in_note = False
    for line in stderr.splitlines():
        if line.startswith("note: "):
            notes.append(line[len("note: "):])
            in_note = True
        elif in_note and line.startswith("  ") and line.strip():
            notes[-1] += " " + line.strip()
        else:
            in_note = False
    return notes


def trace_bytes(trace, max_bytes: int = MAX_TRACE_BYTES, batch_size: Optional[int] = None,
                habitat_cli: Optional[str] = None) -> bytes:
    """The serialised habitat.v1.Trace of `trace` (see read_trace). A
    torch.profiler JSON trace is converted with convert_kineto (batch_size
    goes to the importer; a Kineto trace records none)."""
    data, source = _raw_bytes(trace)
    if _starts_like_json(data):
        return convert_kineto(trace if isinstance(trace, (str, os.PathLike)) else data,
                              batch_size=batch_size, habitat_cli=habitat_cli)
    return _inflate(data, max_bytes, source)


def check_batch_size(batch_size) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) \
            or not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise ValueError(f"batch_size must be an integer in [1, {MAX_BATCH_SIZE}], "
                         f"got {batch_size!r}")


def load_trace(trace, batch_size: Optional[int] = None, habitat_cli: Optional[str] = None,
               max_bytes: int = MAX_TRACE_BYTES):
    """`trace` as a habitat.v1.Trace message (see trace_bytes), with
    `batch_size` set where the trace records none. A batch size other than
    the recorded one is refused: it would relabel the samples, not predict
    them."""
    from . import _messages
    if batch_size is not None:
        check_batch_size(batch_size)
    Trace = _messages.messages()["Trace"]
    if isinstance(trace, Trace):
        message = Trace()
        message.CopyFrom(trace)
    else:
        data = trace_bytes(trace, max_bytes, batch_size=batch_size, habitat_cli=habitat_cli)
        from google.protobuf.message import DecodeError
        try:
            message = Trace.FromString(data)
        except DecodeError as e:
            raise ValueError(f"not a habitat trace (binary habitat.v1.Trace) nor a "
                             f"torch.profiler JSON trace: {e}") from e
    recorded = message.batch_size
    if batch_size is not None:
        if recorded and recorded != batch_size:
            raise ValueError(
                f"the trace records batch size {recorded}; batch_size={batch_size} (the "
                "traced batch) would relabel its samples: leave batch_size out, and to "
                f"predict at batch {batch_size} pass at_batch_size={batch_size} to predict")
        message.batch_size = batch_size
    elif not recorded and message.source == "kineto-import":
        raise ValueError("the torch.profiler trace does not show its batch size (no input "
                         "shapes recorded): pass traced_batch_size=N (the samples in the profiled "
                         "iteration)")
    return message
