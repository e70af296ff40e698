"""Pocket from Python: a thin layer over Pocket's C API (libpocket.so).

    import pocket

    with pocket.Model("model.gguf") as model, model.session() as s:
        print(s.generate("Once upon a time", max_tokens=32, temperature=0))
        for piece in s.generate("Once upon a time", max_tokens=32, stream=True):
            print(piece, end="", flush=True)
        print(s.stats)

A model is opened once (weights memory-mapped) and shared by any number of
sessions, each with its own KV cache. Every call that computes releases the
GIL, so other Python threads run meanwhile. Failures raise pocket.Error
subclasses that are also the built-in exception one expects (ValueError for
bad options, FileNotFoundError for a missing model, OSError for a bad one),
with the library's message.
"""
from __future__ import annotations

import os
import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Mapping, Optional, Sequence, TypeVar, Union, overload

from . import _core
from ._errors import (
    BusyError,
    CancelledError,
    ClosedError,
    ContextFullError,
    Error,
    InternalError,
    InvalidArgumentError,
    ModelError,
    ModelNotFoundError,
    UnsupportedError,
)

__all__ = [
    "Model", "Session", "Stats", "ModelInfo", "version", "abi_version",
    "Error", "InvalidArgumentError", "ClosedError", "ModelError", "ModelNotFoundError", "ContextFullError",
    "CancelledError", "BusyError", "UnsupportedError", "InternalError",
]

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}

_LOG_LEVELS = ("debug", "info", "warning", "error")  # pocket_log_level's order
_STOP_REASONS = ("none", "eos", "stop_string", "max_tokens", "context_full", "callback", "cancelled", "constraint")


def version() -> str:
    """The library's version, "MAJOR.MINOR.PATCH"."""
    return _core.version()


def abi_version() -> int:
    """The library's ABI version (libpocket.so.N)."""
    return _core.abi_version()


@dataclass(frozen=True)
class Stats:
    """What one generate/chat call did."""

    prompt_tokens: int  # tokens the model was given
    reused_tokens: int  # of those, already in the KV cache (earlier chat turns)
    generated_tokens: int
    stop_reason: str  # "eos", "stop_string", "max_tokens", "context_full", "callback", "cancelled", "constraint"
    context_used: int  # tokens in the session's KV cache after the call
    prefill_seconds: float
    decode_seconds: float

    @property
    def decode_tokens_per_second(self) -> float:
        return self.generated_tokens / self.decode_seconds if self.decode_seconds > 0 else 0.0


@dataclass(frozen=True)
class ModelInfo:
    vocab_size: int
    context_length: int  # the model's (a session's context may be smaller)
    n_layers: int
    architecture: str  # "llama", "qwen2", "qwen3", ...


class _Handle:
    """A C API handle that closes once, from whichever thread gets there first."""

    def __init__(self, value: int, close: Callable[[int], None], what: str) -> None:
        self._value = value
        self._close = close
        self._what = what
        self._lock = threading.Lock()

    def get(self) -> int:
        value = self._value
        if not value:
            raise ClosedError(f"pocket: the {self._what} is closed", "POCKET_ERR_INVALID_HANDLE")
        return value

    @property
    def closed(self) -> bool:
        return not self._value

    def close(self) -> None:
        with self._lock:
            value, self._value = self._value, 0
        if value:
            self._close(value)


_Self = TypeVar("_Self", bound="_Closable")


class _Closable:
    """close(), closed, context manager and close-on-collect for the owner of a _Handle."""

    _handle: _Handle

    @property
    def closed(self) -> bool:
        return self._handle.closed

    def close(self) -> None:
        """Closes the handle; a second close does nothing."""
        self._handle.close()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.close()


class Model(_Closable):
    """A model file opened once: GGUF, Pocket file, Hugging Face folder or llama2.c checkpoint.

    ``tokenizer``: the tokenizer.bin of a llama2.c checkpoint (default: found beside it).
    ``on_progress(fraction)``: called while loading; return False to stop (raises CancelledError).
    ``on_log(level, message)``: this model's log messages at ``log_level`` ("debug", "info",
    "warning", "error") and above: what was loaded, notes, failures; called on the thread whose
    call logs, never concurrently for one model.
    """

    def __init__(self, path: Union[str, os.PathLike[str]], *, tokenizer: Optional[str] = None,
                 on_progress: Optional[Callable[[float], Optional[bool]]] = None,
                 on_log: Optional[Callable[[str, str], Any]] = None, log_level: str = "info") -> None:
        self.path = os.fspath(path)
        if log_level not in _LOG_LEVELS:
            raise InvalidArgumentError(f"pocket: log_level {log_level!r} is not one of {', '.join(_LOG_LEVELS)}",
                                       "POCKET_ERR_INVALID_ARGUMENT")
        # Kept for as long as this object lives; every Session references its Model, so the
        # callable outlives every call that can log.
        self._on_log = None if on_log is None else (lambda level, message: on_log(_LOG_LEVELS[level], message))
        try:
            handle = _core.model_open(self.path, tokenizer, on_progress, self._on_log, _LOG_LEVELS.index(log_level))
        except ModelError as e:
            if not os.path.exists(self.path):
                err = ModelNotFoundError(str(e), e.status)
                err.errno, err.filename = 2, self.path  # ENOENT, as open() would say
                raise err from None
            raise
        self._handle = _Handle(handle, _core.model_close, "model")

    def session(self, *, threads: int = 0, context: int = 0, system_prompt: Optional[str] = None,
                thinking: bool = True, mem_budget_mb: int = 0, batch: int = 0,
                kv_cache: Optional[str] = None) -> Session:
        """A new, independent conversation: its own KV cache, not another copy of the weights.

        threads: worker threads (0 = all cores); context: tokens (0 = the model's, at most 4096);
        system_prompt: for chat; thinking: Qwen3 chat (False adds an empty think block);
        mem_budget_mb: hard memory budget in MiB (0 = none; with context 0 the largest context that
        fits is chosen, else InvalidArgumentError giving the numbers); batch: prompt tokens per
        forward pass (1-128, 0 = 128); kv_cache: "f16", "q8" (int8, about half the memory) or "q4"
        (4-bit, about a quarter, costs quality); None = f16, or under a budget the plan's choice
        (f16 when the context fits with it, else q8; Session.kv_cache says which).
        """
        handle = _core.session_open(self._handle.get(), threads, context, thinking, system_prompt, mem_budget_mb,
                                    batch, kv_cache)
        return Session(self, handle, system_prompt)

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Text to token ids; special=True matches control tokens such as <|im_start|> in the text."""
        return _core.tokenize(self._handle.get(), text, special)

    def detokenize(self, ids: Sequence[int]) -> str:
        """Token ids to text (bytes that end mid-character become U+FFFD)."""
        return _core.detokenize(self._handle.get(), list(ids)).decode("utf-8", errors="replace")

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(*_core.model_info(self._handle.get()))

    def __repr__(self) -> str:
        return f"pocket.Model({self.path!r}{', closed' if self.closed else ''})"


class Session(_Closable):
    """One conversation on a Model. One generate/chat at a time (a second concurrent call raises
    BusyError); cancel() and close() work from any thread and stop a running call within one
    decode step (stop_reason "cancelled"). Closing a model keeps its sessions working (the weights
    go with the last one)."""

    def __init__(self, model: Model, handle: int, system_prompt: Optional[str]) -> None:
        self.model = model
        self._handle = _Handle(handle, _core.session_close, "session")
        self._system_prompt = system_prompt
        self._history: Optional[list[tuple[str, str]]] = []  # chat turns so far; None = unknown
        self._stats: Optional[Stats] = None

    # ---- generation ---------------------------------------------------------

    @overload
    def generate(self, prompt: str, *, stream: Literal[False] = ..., on_text: Optional[Callable[[str], Any]] = ...,
                 **options: Any) -> str: ...
    @overload
    def generate(self, prompt: str, *, stream: Literal[True], **options: Any) -> Iterator[str]: ...

    def generate(self, prompt: str, *, stream: bool = False, on_text: Optional[Callable[[str], Any]] = None,
                 **options: Any) -> Union[str, Iterator[str]]:
        """Continues ``prompt`` as plain text (no chat template).

        Returns the generated text, or with ``stream=True`` an iterator of its pieces (whole UTF-8
        characters) as they are produced. ``on_text(piece)`` is called with each piece (return False
        to stop). Options (None or absent = the library's default): max_tokens (256), temperature
        (0.8; 0 = greedy), top_k (40), top_p (0.95), min_p (0.05), repeat_penalty (1.0),
        repeat_last_n (64), seed (0), ignore_eos (False), stop (list of stop strings, not included).
        """
        self._history = None
        if stream:
            return self._stream(False, prompt, options)
        return self._collect(False, prompt, options, on_text)

    def stream(self, prompt: str, **options: Any) -> Iterator[str]:
        """generate(prompt, stream=True, ...)."""
        return self._stream(False, prompt, options)

    @overload
    def chat(self, message: Union[str, Sequence[Message]], *, stream: Literal[False] = ...,
             on_text: Optional[Callable[[str], Any]] = ..., **options: Any) -> str: ...
    @overload
    def chat(self, message: Union[str, Sequence[Message]], *, stream: Literal[True], **options: Any) -> Iterator[str]: ...

    def chat(self, message: Union[str, Sequence[Message]], *, stream: bool = False,
             on_text: Optional[Callable[[str], Any]] = None, **options: Any) -> Union[str, Iterator[str]]:
        """Sends a user message in this session's conversation (the model's chat template) and
        returns the reply (or, with stream=True, an iterator of its pieces). Earlier turns' KV cache
        is reused.

        ``message`` is the new user message, or the whole conversation as OpenAI-style messages
        ({"role", "content"}) ending with the new user message: its earlier turns must be this
        session's conversation so far (an optional leading system message equal to the session's
        system_prompt, then the user/assistant turns as they happened), or absent (a new
        conversation: the session is reset). The C API cannot yet replay assistant turns it did
        not generate, so any other history raises ValueError.
        """
        text = message if isinstance(message, str) else self._next_user_turn(message)
        if stream:
            return self._stream(True, text, options)
        return self._collect(True, text, options, on_text)

    @property
    def stats(self) -> Optional[Stats]:
        """Statistics of the last call that completed on this session (None before the first)."""
        return self._stats

    # ---- control ------------------------------------------------------------

    def cancel(self) -> None:
        """Stops the generate/chat running on this session (from any thread); nothing if none runs."""
        try:
            _core.session_cancel(self._handle.get())
        except ClosedError:
            pass  # closed (perhaps meanwhile): nothing to stop

    def reset(self) -> None:
        """Forgets the conversation and its KV cache."""
        _core.session_reset(self._handle.get())
        self._history = []

    def save_state(self, path: Union[str, os.PathLike[str]]) -> None:
        """Writes the conversation and its KV cache to path (atomically), with the model's fingerprint."""
        _core.session_save_state(self._handle.get(), os.fspath(path))

    def load_state(self, path: Union[str, os.PathLike[str]]) -> None:
        """Replaces the conversation with one saved from a session on the same model; it continues
        exactly as the saved one would have. Another model's file, or a damaged one, raises and leaves
        the session as it was."""
        _core.session_load_state(self._handle.get(), os.fspath(path))
        self._history = None  # the saved turns are not known here

    def share_chat_start(self, *targets: Session) -> None:
        """Starts a new conversation here, prefills its start (the system prompt as the chat template
        renders it) once, and starts each target (sessions of the same model) from a copy of those KV
        rows instead of prefilling them again."""
        handles = [t._handle.get() for t in targets]
        _core.session_share_chat_start(self._handle.get(), handles)
        for s in (self, *targets):
            s._history = []

    @property
    def threads(self) -> int:
        return _core.session_get_threads(self._handle.get())

    @threads.setter
    def threads(self, n: int) -> None:
        _core.session_set_threads(self._handle.get(), n)

    @property
    def context_size(self) -> int:
        return _core.session_context_size(self._handle.get())

    @property
    def kv_cache(self) -> str:
        """The KV cache type: "f16", "q8" or "q4" (as asked, or as the memory plan chose)."""
        return _core.session_kv_cache(self._handle.get())

    # ---- internals ----------------------------------------------------------

    def _run(self, chat: bool, text: str, options: Mapping[str, Any],
             on_piece: Optional[Callable[[str], Any]]) -> str:
        if not isinstance(text, str):
            raise TypeError(f"pocket: the {'message' if chat else 'prompt'} must be a str, not {type(text).__name__}")
        if "\0" in text:
            raise InvalidArgumentError("pocket: the text contains a NUL character", "POCKET_ERR_INVALID_ARGUMENT")
        unknown = set(options) - _OPTION_NAMES
        if unknown:
            raise TypeError(f"pocket: unknown generation option(s): {', '.join(sorted(unknown))}")
        stop = options.get("stop") or []
        if isinstance(stop, str):
            stop = [stop]
        reply, raw = _core.generate(
            self._handle.get(), chat, text, options.get("max_tokens"), options.get("temperature"),
            options.get("top_k"), options.get("top_p"), options.get("min_p"), options.get("repeat_penalty"),
            options.get("repeat_last_n"), options.get("seed"), bool(options.get("ignore_eos", False)),
            list(stop), on_piece)
        stats = Stats(raw[0], raw[1], raw[2], _STOP_REASONS[raw[3]] if 0 <= raw[3] < len(_STOP_REASONS) else "none",
                      raw[4], raw[5], raw[6])
        self._stats = stats
        return reply

    def _collect(self, chat: bool, text: str, options: Mapping[str, Any],
                 on_text: Optional[Callable[[str], Any]]) -> str:
        # Without on_text no Python code runs during the call (the GIL stays free).
        reply = self._run(chat, text, options, on_text)
        if chat:
            self._record_turn(text, reply)
        return reply

    def _stream(self, chat: bool, text: str, options: Mapping[str, Any]) -> Iterator[str]:
        # The C call runs on a worker thread (GIL released) and hands pieces
        # over a queue; closing the iterator early cancels the call.
        pieces: queue.SimpleQueue[Any] = queue.SimpleQueue()
        done = object()
        stop = threading.Event()

        def on_piece(piece: str) -> bool:
            pieces.put(piece)
            return not stop.is_set()

        def work() -> None:
            try:
                self._run(chat, text, options, on_piece)
                pieces.put((done, None))
            except BaseException as e:  # handed to the consumer
                pieces.put((done, e))

        def iterate() -> Iterator[str]:
            worker = threading.Thread(target=work, name="pocket-stream", daemon=True)
            worker.start()
            reply: list[str] = []
            try:
                while True:
                    item = pieces.get()
                    if isinstance(item, tuple) and item[0] is done:
                        if item[1] is not None:
                            raise item[1]
                        if chat:
                            self._record_turn(text, "".join(reply))
                        return
                    reply.append(item)
                    yield item
            finally:
                if worker.is_alive():
                    self._history = None  # the reply was cut: the conversation is no longer known here
                    stop.set()
                    self.cancel()
                    worker.join()

        return iterate()

    def _record_turn(self, user: str, reply: str) -> None:
        if self._history is not None:
            self._history += [("user", user), ("assistant", reply)]

    def _next_user_turn(self, messages: Sequence[Message]) -> str:
        turns = []
        for i, m in enumerate(messages):
            try:
                role, content = m["role"], m["content"]
            except (KeyError, TypeError):
                raise InvalidArgumentError(f"pocket: message {i} is not a {{'role', 'content'}} mapping",
                                           "POCKET_ERR_INVALID_ARGUMENT") from None
            if role not in ("system", "user", "assistant") or not isinstance(content, str):
                raise InvalidArgumentError(f"pocket: message {i} has role {role!r}; expected system, user or "
                                           "assistant with str content", "POCKET_ERR_INVALID_ARGUMENT")
            turns.append((role, content))
        if turns and turns[0][0] == "system":
            if turns[0][1] != (self._system_prompt or ""):
                raise InvalidArgumentError("pocket: the system message differs from the session's system_prompt "
                                           "(set it with model.session(system_prompt=...))",
                                           "POCKET_ERR_INVALID_ARGUMENT")
            turns = turns[1:]
        if not turns or turns[-1][0] != "user":
            raise InvalidArgumentError("pocket: the last message must be the new user message",
                                       "POCKET_ERR_INVALID_ARGUMENT")
        earlier = turns[:-1]
        if not earlier:
            if self._history != []:
                self.reset()  # a new conversation
        elif earlier != self._history:
            raise InvalidArgumentError(
                "pocket: the earlier messages are not this session's conversation so far; the C API cannot "
                "replay assistant turns it did not generate (start a new conversation with only the new "
                "user message)", "POCKET_ERR_INVALID_ARGUMENT")
        return turns[-1][1]


_OPTION_NAMES = frozenset({"max_tokens", "temperature", "top_k", "top_p", "min_p", "repeat_penalty",
                           "repeat_last_n", "seed", "ignore_eos", "stop"})
