"""The official `openai` Python client against `pocket serve` (stories260K,
temperature 0): non-streaming and streaming chat and completions, stop
strings, usage, the error statuses, the API key, a client that disconnects
mid-stream, /metrics after a request, structured output (response_format
json_schema and json_object, outputs validated by the `jsonschema` package),
and the server examples of docs/embedding.md.

    python openai_client_test.py --pocket build/release/pocket --model ../shared/models/stories260K.bin
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

import jsonschema
import openai

from pocket_server import PocketServer

ARGS = None
SRV = None
PROMPT = "Once upon a time"


def client(srv=None, key="unused", **kw):
    return openai.OpenAI(base_url=(srv or SRV).url + "/v1", api_key=key, max_retries=0, **kw)


def pocket_run(n, prompt=PROMPT):
    """What `pocket run` prints for the prompt at temperature 0: the prompt, the continuation, a newline."""
    out = subprocess.run([ARGS.pocket, "run", "-m", ARGS.model, "-p", prompt, "-n", str(n), "--temp", "0", "-q"],
                         check=True, capture_output=True, text=True).stdout
    assert out.startswith(prompt) and out.endswith("\n"), out
    return out[len(prompt):-1]


def setUpModule():
    global SRV
    SRV = PocketServer(ARGS.pocket, ARGS.model, "-p", "2", "-c", "256", "--model-name", "stories",
                       "--max-body", "65536")


def tearDownModule():
    SRV.stop()


class Generation(unittest.TestCase):
    def test_models_lists_the_loaded_model(self):
        ids = [m.id for m in client().models.list()]
        self.assertEqual(ids, ["stories"])

    def test_chat_non_streaming_equals_pocket_run(self):
        r = client().chat.completions.create(model="anything", messages=[{"role": "user", "content": PROMPT}],
                                             max_tokens=24, temperature=0)
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(r.model, "anything")  # accepted as given
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertEqual(r.choices[0].message.content, pocket_run(24))
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 24)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + 24)

    def test_completion_non_streaming(self):
        r = client().completions.create(model="stories", prompt=PROMPT, max_tokens=10, temperature=0)
        self.assertEqual(r.choices[0].text, pocket_run(10))
        self.assertEqual(r.usage.completion_tokens, 10)

    def test_chat_streaming_chunks_in_order(self):
        stream = client().chat.completions.create(model="stories", messages=[{"role": "user", "content": PROMPT}],
                                                  max_tokens=20, temperature=0, stream=True,
                                                  stream_options={"include_usage": True})
        chunks = list(stream)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(text, pocket_run(20))
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(finish, ["length"])
        self.assertEqual(chunks[-2].choices[0].finish_reason, "length")
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, 20)
        self.assertEqual(len({c.id for c in chunks}), 1)

    def test_completion_streaming(self):
        stream = client().completions.create(model="stories", prompt=PROMPT, max_tokens=12, temperature=0, stream=True)
        chunks = list(stream)
        self.assertEqual("".join(c.choices[0].text for c in chunks if c.choices), pocket_run(12))
        self.assertEqual(chunks[-1].usage.completion_tokens, 12)

    def test_stop_strings(self):
        full = pocket_run(60)
        self.assertIn("Lily", full)
        for stream in (False, True):
            r = client().chat.completions.create(model="stories", messages=[{"role": "user", "content": PROMPT}],
                                                 max_tokens=60, temperature=0, stop=["Lily", "zzz"], stream=stream)
            if stream:
                chunks = list(r)
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                reason = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason][0]
            else:
                text, reason = r.choices[0].message.content, r.choices[0].finish_reason
            self.assertEqual(text, full[:full.index("Lily")])
            self.assertEqual(reason, "stop")

    def test_seeded_sampling_is_reproducible(self):
        def once():
            return client().completions.create(model="s", prompt=PROMPT, max_tokens=16, temperature=1.0, top_p=0.9,
                                               seed=42).choices[0].text
        self.assertEqual(once(), once())

    def test_conversation_reuses_the_cache(self):
        c = client()
        msgs = [{"role": "system", "content": "Tell a story about a fox named Rob."},
                {"role": "user", "content": "Once upon a time there was a fox."}]
        first = c.chat.completions.create(model="s", messages=msgs, max_tokens=8, temperature=0)
        msgs += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "The fox ran."}]
        second = c.chat.completions.create(model="s", messages=msgs, max_tokens=8, temperature=0)
        self.assertGreaterEqual(second.usage.prompt_tokens_details.cached_tokens, first.usage.prompt_tokens - 1)


class Errors(unittest.TestCase):
    def assert_error(self, ctx, status, param=None, says=None, code=None):
        e = ctx.exception
        self.assertEqual(e.status_code, status)
        err = e.body if isinstance(e.body, dict) else {}
        if param:
            self.assertEqual(err.get("param"), param)
        if says:
            self.assertIn(says, err.get("message", ""))
        if code:
            self.assertEqual(err.get("code"), code)

    def test_bad_values_and_types(self):
        c = client()
        msgs = [{"role": "user", "content": "Hi"}]
        with self.assertRaises(openai.BadRequestError) as ctx:
            c.chat.completions.create(model="s", messages=msgs, temperature=5)
        self.assert_error(ctx, 400, "temperature", "between 0")
        with self.assertRaises(openai.BadRequestError) as ctx:
            c.chat.completions.create(model="s", messages=msgs, extra_body={"max_tokens": "ten"})
        self.assert_error(ctx, 400, "max_tokens", "integer")
        with self.assertRaises(openai.BadRequestError) as ctx:
            c.chat.completions.create(model="s", messages=[{"role": "wizard", "content": "x"}])
        self.assert_error(ctx, 400, "messages[0].role")
        with self.assertRaises(openai.BadRequestError) as ctx:
            c.chat.completions.create(model="s", messages=msgs, n=2)
        self.assert_error(ctx, 400, "n")

    def test_bad_response_formats_name_the_field(self):
        msgs = [{"role": "user", "content": "Hi"}]
        cases = [
            ({"type": "yaml"}, "response_format.type", "supported types"),
            ({"type": "json_schema"}, "response_format.json_schema", "required"),
            ({"type": "json_schema", "json_schema": {"schema": {}}}, "response_format.json_schema.name", "required"),
            ({"type": "json_schema", "json_schema": {"name": "x", "schema": []}},
             "response_format.json_schema.schema", "must be an object"),
            # An unsupported keyword: the compiler's message names it and its JSON pointer.
            ({"type": "json_schema", "json_schema": {"name": "x", "schema": {
                "type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}}}},
             "response_format.json_schema.schema", "'uniqueItems' at /properties/a/uniqueItems"),
        ]
        for rf, param, says in cases:
            with self.assertRaises(openai.BadRequestError) as ctx:
                client().chat.completions.create(model="s", messages=msgs, max_tokens=4, response_format=rf)
            self.assert_error(ctx, 400, param, says)

    def test_prompt_longer_than_the_slot_context(self):
        with self.assertRaises(openai.BadRequestError) as ctx:
            client().completions.create(model="s", prompt="Once upon a time " * 200, max_tokens=4)
        self.assert_error(ctx, 400, "prompt", "context", "context_length_exceeded")

    def test_malformed_json_oversize_body_and_unknown_path(self):
        def post(path, data):
            req = urllib.request.Request(SRV.url + path, data=data, headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(req, timeout=10)
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()
            return 200, ""
        code, body = post("/v1/chat/completions", b'{"messages": [')
        self.assertEqual(code, 400)
        self.assertIn('"invalid_json"', body)
        code, body = post("/v1/completions", b"x" * 100000)
        self.assertEqual(code, 413)
        self.assertIn("limit", body)
        code, body = post("/v1/nothing", b"{}")
        self.assertEqual(code, 404)
        self.assertIn('"error"', body)

    def test_api_key(self):
        with PocketServer(ARGS.pocket, ARGS.model, api_key="sekrit") as srv:
            msgs = [{"role": "user", "content": PROMPT}]
            with self.assertRaises(openai.AuthenticationError) as ctx:
                client(srv, key="wrong").chat.completions.create(model="s", messages=msgs, max_tokens=2)
            self.assert_error(ctx, 401, code="invalid_api_key")
            with self.assertRaises(openai.AuthenticationError):
                client(srv, key="sekrit-and-more").models.list()
            r = client(srv, key="sekrit").chat.completions.create(model="s", messages=msgs, max_tokens=2)
            self.assertEqual(r.usage.completion_tokens, 2)
            self.assertEqual(srv.health()["status"], "ok")  # /health needs no key

    def test_queue_full_is_503(self):
        # One slot, no queue, 12 requests at once: some are refused with 503
        # (the rest served), whatever the timing.
        with PocketServer(ARGS.pocket, ARGS.model, "-p", "1", "--queue", "0") as srv:
            c = client(srv)

            def one(_):
                try:
                    return c.completions.create(model="s", prompt=PROMPT, max_tokens=200, temperature=0).usage
                except openai.InternalServerError as e:
                    return e
            with concurrent.futures.ThreadPoolExecutor(12) as pool:
                results = list(pool.map(one, range(12)))
            refused = [r for r in results if isinstance(r, openai.InternalServerError)]
            self.assertTrue(refused, "no request was refused")
            self.assertLess(len(refused), 12)
            for e in refused:
                self.assertEqual(e.status_code, 503)
                self.assertEqual(e.body.get("code"), "server_busy")

    def test_port_in_use_is_a_clear_error(self):
        r = subprocess.run([ARGS.pocket, "serve", "-m", ARGS.model, "--port", str(SRV.port)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"cannot listen on 127.0.0.1:{SRV.port}", r.stderr)

    def test_disconnect_cancels_and_frees_the_slot(self):
        before = SRV.metrics()
        stream = client().chat.completions.create(model="s", messages=[{"role": "user", "content": PROMPT}],
                                                  max_tokens=240, stream=True)
        it = iter(stream)
        for _ in range(3):
            next(it)
        stream.close()  # the client goes away mid-stream
        deadline = time.time() + 5
        while time.time() < deadline:
            m = SRV.metrics()
            if m["pocket_requests_cancelled_total"] > before["pocket_requests_cancelled_total"] and \
                    m["pocket_slots_busy"] == 0:
                break
            time.sleep(0.02)
        m = SRV.metrics()
        self.assertEqual(m["pocket_requests_cancelled_total"], before["pocket_requests_cancelled_total"] + 1)
        self.assertEqual(m["pocket_slots_busy"], 0)
        generated = m["pocket_generated_tokens_total"] - before["pocket_generated_tokens_total"]
        self.assertLess(generated, 240, "generation went on after the client left")


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "pets": {"type": "array", "items": {"enum": ["cat", "dog", "bird"]}, "maxItems": 3},
    },
    "required": ["name", "age", "pets"],
    "additionalProperties": False,
}
TICKET = {
    "type": "object",
    "properties": {
        "priority": {"enum": ["low", "high"]},
        "done": {"type": "boolean"},
        "id": {"type": "string", "format": "uuid"},
    },
    "required": ["priority", "done", "id"],
    "additionalProperties": False,
}


class StructuredOutput(unittest.TestCase):
    """response_format through the official client; every output parses and
    validates with `jsonschema` (an independent validator)."""

    def schema_format(self, name, schema):
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}

    def test_json_schema_non_streaming_and_streaming_concurrently(self):
        msgs = [{"role": "user", "content": PROMPT}]

        def one(i):
            schema = (PERSON, TICKET)[i % 2]
            kw = dict(model="s", messages=msgs, max_tokens=200, temperature=1.0, seed=i,
                      response_format=self.schema_format(("person", "ticket")[i % 2], schema))
            if i % 3 == 2:  # some streamed
                chunks = list(client().chat.completions.create(stream=True, **kw))
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
                return schema, text, finish[-1]
            r = client().chat.completions.create(**kw)
            return schema, r.choices[0].message.content, r.choices[0].finish_reason

        def plain(_):
            return client().completions.create(model="s", prompt=PROMPT, max_tokens=16, temperature=0).choices[0].text

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            free = [pool.submit(plain, i) for i in range(2)]
            results = list(pool.map(one, range(6)))
        for schema, text, finish in results:
            self.assertEqual(finish, "stop", text)
            jsonschema.validate(json.loads(text), schema, format_checker=jsonschema.FormatChecker())
        for f in free:  # plain requests beside them are untouched
            self.assertEqual(f.result(), pocket_run(16))

    def test_json_object(self):
        r = client().chat.completions.create(model="s", messages=[{"role": "user", "content": PROMPT}],
                                             max_tokens=200, temperature=0,
                                             response_format={"type": "json_object"})
        text = r.choices[0].message.content
        if r.choices[0].finish_reason == "stop":
            json.loads(text)
        else:  # max_tokens first: said so, and what came is a JSON prefix
            self.assertEqual(r.choices[0].finish_reason, "length")
            self.assertIn(text[:1], '{["-0123456789tfn')

    def test_max_tokens_first_is_length(self):
        r = client().completions.create(model="s", prompt=PROMPT, max_tokens=3, temperature=0,
                                        extra_body={"response_format": self.schema_format("person", PERSON)})
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertTrue(r.choices[0].text.startswith('{"'), r.choices[0].text)


class Metrics(unittest.TestCase):
    def test_metrics_count_what_was_served(self):
        """A fresh server's /metrics after one completion: the counters hold
        exactly that request's numbers and the gauges are there."""
        with PocketServer(ARGS.pocket, ARGS.model, "-p", "1", "-c", "256") as srv:
            before = srv.metrics()
            self.assertEqual(before["pocket_generated_tokens_total"], 0)
            r = client(srv).completions.create(model="m", prompt=PROMPT, max_tokens=12, temperature=0,
                                               extra_body={"ignore_eos": True})
            self.assertEqual(r.usage.completion_tokens, 12)
            key = 'pocket_http_responses_total{endpoint="/v1/completions",status="200"}'
            deadline = time.time() + 5  # a response is counted once its last byte is written
            m = srv.metrics()
            while m.get(key, 0) < 1 and time.time() < deadline:
                time.sleep(0.02)
                m = srv.metrics()
            self.assertEqual(m[key], 1)
            self.assertEqual(m["pocket_requests_finished_total"], 1)
            self.assertEqual(m["pocket_generated_tokens_total"], 12)
            self.assertEqual(m["pocket_prompt_tokens_total"], r.usage.prompt_tokens)
            self.assertEqual(m["pocket_decode_steps_total"], 11)  # the first token comes from the prompt pass
            self.assertGreater(m["pocket_tokens_per_second"], 0)
            self.assertEqual(m["pocket_queue_depth"], 0)
            self.assertEqual(m["pocket_slots_busy"], 0)
            self.assertEqual(m["pocket_slots"], 1)
            with urllib.request.urlopen(srv.url + "/metrics", timeout=10) as resp:
                self.assertTrue(resp.headers["Content-Type"].startswith("text/plain"))


class DocsExamples(unittest.TestCase):
    """The blocks of docs/embedding.md that follow `<!-- server-example -->`
    run against the server (127.0.0.1:8080 there becomes the test's port)."""

    def test_docs_examples_run(self):
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "embedding.md"), encoding="utf-8") as f:
            doc = f.read()
        blocks = re.findall(r"<!-- server-example -->\s*```(sh|python)\n(.*?)```", doc, re.S)
        self.assertGreaterEqual(len(blocks), 3)
        for lang, code in blocks:
            code = code.replace("127.0.0.1:8080", f"{SRV.host}:{SRV.port}")
            cmd = ["bash", "-euo", "pipefail", "-c", code] if lang == "sh" else [sys.executable, "-c", code]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, f"{lang} example failed:\n{code}\n{r.stdout}\n{r.stderr}")
            self.assertTrue(r.stdout.strip(), f"{lang} example printed nothing:\n{code}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--pocket", required=True)
    ap.add_argument("--model", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=1)
