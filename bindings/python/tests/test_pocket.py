"""Tests of the pocket Python package on stories260K (scripts/bindings.sh runs them
against the installed wheel). POCKET_TEST_MODEL names the model."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

import pocket

MODEL = os.environ.get("POCKET_TEST_MODEL", str(pathlib.Path(__file__).resolve().parents[3] / "shared/models/stories260K.bin"))
ROOT = pathlib.Path(os.environ.get("POCKET_ROOT", pathlib.Path(__file__).resolve().parents[3]))
GREEDY = dict(temperature=0, ignore_eos=True)


@pytest.fixture(scope="module")
def model():
    with pocket.Model(MODEL) as m:
        yield m


def test_installed_package_is_not_the_source_tree():
    # The wheel's own copy of libpocket sits beside the module.
    pkg = pathlib.Path(pocket.__file__).parent
    assert (pkg / f"libpocket.so.{pocket.abi_version()}").exists()
    assert pocket.version().count(".") == 2


def test_generate_is_greedy_deterministic_with_stats(model):
    info = model.info
    assert info.vocab_size > 0 and info.n_layers > 0 and info.architecture
    with model.session(threads=1) as s:
        a = s.generate("Once upon a time", max_tokens=24, **GREEDY)
        st = s.stats
        assert st.generated_tokens == 24 and st.stop_reason == "max_tokens"
        assert st.prompt_tokens > 0 and st.context_used >= st.prompt_tokens + 23
        assert st.decode_seconds > 0 and st.decode_tokens_per_second > 0
        assert len(a) > 10
        s.reset()
        assert s.generate("Once upon a time", max_tokens=24, **GREEDY) == a


def test_sampling_options_reach_the_library(model):
    with model.session() as s:
        def run(**o):
            return s.generate("Once upon a time", max_tokens=40, ignore_eos=True, **o)

        sampled = run(temperature=0.9, seed=5, min_p=0)
        assert run(temperature=0.9, seed=5, min_p=0) == sampled  # the seed makes it repeatable
        assert run(temperature=0.9, seed=6, min_p=0) != sampled  # and is passed on
        assert run(temperature=0.9, seed=5, min_p=0, top_k=2) != sampled
        assert run(temperature=1.0, seed=5, top_k=1) == run(temperature=0)  # top_k 1 is greedy


def test_stream_yields_the_pieces_of_the_same_text(model):
    with model.session() as s:
        whole = s.generate("One day", max_tokens=32, **GREEDY)
        pieces = list(s.generate("One day", max_tokens=32, stream=True, **GREEDY))
        assert len(pieces) > 1 and "".join(pieces) == whole
        assert s.stats.generated_tokens == 32
        assert "".join(s.stream("One day", max_tokens=32, **GREEDY)) == whole
        seen = []
        assert s.generate("One day", max_tokens=32, on_text=seen.append, **GREEDY) == whole
        assert "".join(seen) == whole


def test_closing_a_stream_early_cancels_it_and_the_session_stays_usable(model):
    with model.session() as s:
        it = s.stream("Once upon a time", max_tokens=400, **GREEDY)
        first = [next(it) for _ in range(3)]
        assert len(first) == 3
        it.close()
        assert s.stats.stop_reason in ("cancelled", "callback")
        assert s.stats.generated_tokens < 400
        assert s.generate("Once", max_tokens=4, **GREEDY)


def test_a_second_call_while_one_runs_is_busy(model):
    with model.session() as s:
        inside, release = threading.Event(), threading.Event()

        def hold(piece):  # keeps the first call inside the library until released
            inside.set()
            release.wait(30)

        t = threading.Thread(target=lambda: s.generate("Once upon a time", max_tokens=4, on_text=hold, **GREEDY))
        t.start()
        try:
            assert inside.wait(30)
            with pytest.raises(pocket.BusyError) as e:
                s.generate("x", max_tokens=2)
            assert isinstance(e.value, RuntimeError) and e.value.status == "POCKET_ERR_BUSY"
        finally:
            release.set()
            t.join()


def test_stop_strings_end_the_text_before_them(model):
    with model.session() as s:
        whole = s.generate("Once upon a time", max_tokens=48, **GREEDY)
        stop = whole[len(whole) // 2: len(whole) // 2 + 3]
        cut = s.generate("Once upon a time", max_tokens=48, stop=[stop], **GREEDY)
        assert cut == whole[: whole.index(stop)]
        assert s.stats.stop_reason == "stop_string"


def test_on_text_returning_false_stops(model):
    with model.session() as s:
        seen = []
        s.generate("Once upon a time", max_tokens=64, on_text=lambda p: seen.append(p) or len(seen) < 3, **GREEDY)
        assert len(seen) == 3 and s.stats.stop_reason == "callback"


def test_a_callback_exception_reaches_the_caller(model):
    class Boom(Exception):
        pass

    def explode(piece):
        raise Boom(piece)

    with model.session() as s:
        with pytest.raises(Boom):
            s.generate("Once upon a time", max_tokens=64, on_text=explode, **GREEDY)
        assert len(s.generate("Once", max_tokens=4, **GREEDY)) > 0


def test_tokenize_detokenize_round_trip(model):
    text = "Once upon a time, there was a little dog."
    ids = model.tokenize(text)
    assert 3 < len(ids) < len(text)
    assert model.detokenize(ids) in (text, " " + text)
    assert model.tokenize("") == []
    uni = "h\u00e9llo \U0001F600 world \u4e2d\u6587"  # byte fallback: every character survives
    assert model.detokenize(model.tokenize(uni)) in (uni, " " + uni)
    with pytest.raises(ValueError, match="vocabulary|id"):
        model.detokenize([model.info.vocab_size + 5])


def test_cancel_from_another_thread_stops_within_one_step(model):
    with model.session() as s:
        started = threading.Event()
        after = []
        cancelled = threading.Event()

        def on_text(piece):
            started.set()
            if cancelled.is_set():
                after.append(piece)
            time.sleep(0.002)

        result = {}
        t = threading.Thread(target=lambda: result.update(
            text=s.generate("Once upon a time", max_tokens=s.context_size - 16, on_text=on_text, **GREEDY)))
        t.start()
        assert started.wait(30)
        s.cancel()
        cancelled.set()
        t.join(30)
        assert not t.is_alive()
        assert s.stats.stop_reason == "cancelled"
        assert s.stats.generated_tokens < s.context_size - 16
        assert len(after) <= 1


def test_generate_releases_the_gil(model):
    # Another Python thread keeps calling cancel() while generate runs without
    # a callback. It can only get in if generate released the GIL: held, the
    # call would run to its token limit (a cancel before a call starts does
    # nothing); released, the cancel lands mid-generation.
    with model.session() as s:
        done = threading.Event()
        calls = [0]

        def spin():
            while not done.is_set():
                s.cancel()
                calls[0] += 1

        t = threading.Thread(target=spin)
        t.start()
        try:
            before = calls[0]
            s.generate("Once upon a time", max_tokens=s.context_size - 16, **GREEDY)
            during = calls[0] - before
        finally:
            done.set()
            t.join()
        assert s.stats.stop_reason == "cancelled", (s.stats, during)
        assert during > 0


def test_two_sessions_generate_at_once_and_stay_independent(model):
    with model.session() as a, model.session() as b:
        out = {}
        t = threading.Thread(target=lambda: out.update(b=b.generate("Once upon a time", max_tokens=32, **GREEDY)))
        t.start()
        out["a"] = a.generate("Once upon a time", max_tokens=32, **GREEDY)
        t.join()
        assert out["a"] == out["b"]
        a.generate("The little dog", max_tokens=8, **GREEDY)
        assert b.generate("Once upon a time", max_tokens=32, **GREEDY) == out["a"]


def test_chat_reuses_earlier_turns_and_accepts_the_conversation(model):
    with model.session() as s:
        r1 = s.chat("Tell me a story.", max_tokens=8, **GREEDY)
        first = s.stats
        r2 = s.chat("And then?", max_tokens=8, **GREEDY)
        assert s.stats.reused_tokens >= first.context_used - 1
        # The same conversation as messages: the earlier turns must be the session's.
        with model.session() as m:
            msgs = [{"role": "user", "content": "Tell me a story."}]
            assert m.chat(msgs, max_tokens=8, **GREEDY) == r1
            msgs += [{"role": "assistant", "content": r1}, {"role": "user", "content": "And then?"}]
            assert "".join(m.chat(msgs, stream=True, max_tokens=8, **GREEDY)) == r2
            assert m.stats.reused_tokens >= first.context_used - 1
            with pytest.raises(ValueError, match="conversation so far"):
                m.chat([{"role": "user", "content": "x"}, {"role": "assistant", "content": "not said"},
                        {"role": "user", "content": "y"}])
            with pytest.raises(ValueError, match="last message"):
                m.chat([{"role": "assistant", "content": "hi"}])


def test_close_twice_and_use_after_close(model):
    m = pocket.Model(MODEL)
    s = m.session()
    s.close()
    s.close()
    m.close()
    m.close()
    assert s.closed and m.closed
    with pytest.raises(ValueError, match="closed"):
        s.generate("x")
    with pytest.raises(pocket.ClosedError):
        m.session()
    s.cancel()  # harmless


def test_closing_the_session_from_its_own_callback_stops_the_call(model):
    s = model.session()
    seen = []

    def close_at_three(piece):
        seen.append(piece)
        if len(seen) == 3:
            s.close()

    s.generate("Once upon a time", max_tokens=64, on_text=close_at_three, **GREEDY)
    assert s.closed and s.stats.stop_reason == "cancelled" and len(seen) <= 4
    with pytest.raises(pocket.ClosedError):
        s.generate("x")


def test_a_session_outlives_its_model_handle():
    m = pocket.Model(MODEL)
    with m.session() as s:
        m.close()
        assert s.generate("Once", max_tokens=4, **GREEDY)


def test_bad_paths_and_files_raise_os_errors_with_the_message(tmp_path):
    missing = tmp_path / "no-such-model.gguf"
    with pytest.raises(FileNotFoundError) as e:
        pocket.Model(missing)
    assert str(missing) in str(e.value) and isinstance(e.value, pocket.ModelError)
    assert e.value.filename == str(missing)
    bad = tmp_path / "garbage.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 60)
    with pytest.raises(OSError) as e:
        pocket.Model(bad)
    assert isinstance(e.value, pocket.ModelError) and not isinstance(e.value, FileNotFoundError)
    assert str(bad) in str(e.value)


def test_bad_options_raise_value_errors_naming_them(model):
    with model.session() as s:
        with pytest.raises(ValueError, match="temperature"):
            s.generate("Once", temperature=-1)
        with pytest.raises(pocket.InvalidArgumentError):
            s.generate("Once", max_tokens=-3)
        with pytest.raises(TypeError, match="unknown generation option"):
            s.generate("Once", max_tokenz=3)
        with pytest.raises(TypeError):
            s.generate("Once", max_tokens="many")
        with pytest.raises(ValueError, match="NUL"):
            s.generate("Once\0upon")
        with pytest.raises(ValueError):
            s.threads = 0
    with pytest.raises(ValueError):
        model.session(context=-5)


def test_a_saved_session_continues_exactly_where_it_stopped(model, tmp_path):
    with model.session() as whole:
        whole.chat("Tell me a story.", max_tokens=10, **GREEDY)
        expected = whole.chat("And then?", max_tokens=10, **GREEDY)
    state = tmp_path / "chat.state"
    with model.session() as first:
        first.chat("Tell me a story.", max_tokens=10, **GREEDY)
        first.save_state(state)
    assert [p.name for p in tmp_path.iterdir()] == ["chat.state"]  # written under a temporary name, renamed
    with model.session() as second:
        second.load_state(str(state))
        assert second.chat("And then?", max_tokens=10, **GREEDY) == expected
        assert second.stats.reused_tokens > 0
        # A damaged file: an error naming it, and the session is left as it was.
        (tmp_path / "bad.state").write_bytes(state.read_bytes()[:40])
        with pytest.raises(pocket.Error, match="bad.state: truncated"):
            second.load_state(tmp_path / "bad.state")
        assert second.context_size > 0


def test_a_shared_chat_start_gives_the_replies_of_a_full_prefill(model):
    system = "You are a teller of short stories about a small dog and a red ball. " * 4
    with model.session(system_prompt=system) as plain:
        expected = plain.chat("Tell me a story.", max_tokens=10, **GREEDY)
    with model.session(system_prompt=system) as src, model.session(system_prompt=system) as a, \
            model.session(system_prompt=system) as b:
        src.share_chat_start(a, b)
        assert a.chat("Tell me a story.", max_tokens=10, **GREEDY) == expected
        assert a.stats.reused_tokens > 10  # the shared prefix was not prefilled again
        assert b.chat("Tell me a story.", max_tokens=10, **GREEDY) == expected
        assert src.chat("Tell me a story.", max_tokens=10, **GREEDY) == expected
    with model.session() as s:
        closed = model.session()
        closed.close()
        with pytest.raises(pocket.ClosedError):
            s.share_chat_start(closed)


def test_a_memory_budget_chooses_the_context_or_is_refused(model):
    with pytest.raises(pocket.InvalidArgumentError, match="too small"):
        model.session(mem_budget_mb=1)
    with model.session(mem_budget_mb=64, batch=16) as s:
        assert 64 <= s.context_size <= 512
        assert s.kv_cache == "f16"  # the whole context fits with f16 in 64 MiB
    for kv in ("q8", "q4"):
        with model.session(kv_cache=kv) as s:
            assert s.kv_cache == kv
            assert s.generate("Once upon a time", max_tokens=4, **GREEDY)
    with pytest.raises(pocket.InvalidArgumentError, match="unknown KV cache type 'q3'"):
        model.session(kv_cache="q3")
        assert s.generate("Once upon a time", max_tokens=4, **GREEDY)


def test_a_prompt_longer_than_the_context_is_context_full(model):
    with model.session(context=32) as s:
        with pytest.raises(pocket.ContextFullError) as e:
            s.generate("Once upon a time " * 40, max_tokens=4)
        assert isinstance(e.value, ValueError) and "context" in str(e.value)


def test_load_progress_rises_to_one_and_can_cancel():
    seen = []
    with pocket.Model(MODEL, on_progress=seen.append):
        pass
    assert seen and seen[-1] == pytest.approx(1.0) and seen == sorted(seen)
    with pytest.raises(pocket.CancelledError):
        pocket.Model(MODEL, on_progress=lambda p: False)


def test_log_callback_hears_loads_and_failures():
    lines = []
    m = pocket.Model(MODEL, on_log=lambda level, msg: lines.append((level, msg)), log_level="debug")
    assert ("info", "loaded " + MODEL) in [(lv, msg[: len("loaded ") + len(MODEL)]) for lv, msg in lines]
    with m.session() as s:
        m.close()  # the sessions keep the callback alive
        with pytest.raises(ValueError):
            s.generate("x", top_k=-5)
    assert any(lv == "error" and "top-k -5" in msg for lv, msg in lines), lines
    quiet = []
    with pocket.Model(MODEL, on_log=lambda level, msg: quiet.append(msg), log_level="error"):
        pass
    assert quiet == []
    with pytest.raises(ValueError, match="log_level"):
        pocket.Model(MODEL, log_level="loud")


def test_the_docs_example_runs():
    # docs/embedding.md's Python example is this file (tests/test_docs.py checks the copy).
    r = subprocess.run([sys.executable, str(ROOT / "bindings/python/examples/example.py"), MODEL],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Once upon a time") and len(r.stdout) > 30
    assert "generated" in r.stderr
