// Renders the chat cases in tests/data/chat/cases.json with the Qwen3 chat
// template (shared/tokenizers/qwen3/tokenizer_config.json) using Hugging
// Face's Jinja port, and writes tests/data/chat/qwen3_golden.json.
// Usage: node render.mjs   (after `npm ci` in this folder)
import { Template } from "@huggingface/jinja";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const config = JSON.parse(fs.readFileSync(path.resolve(root, "../shared/tokenizers/qwen3/tokenizer_config.json"), "utf8"));
const cases = JSON.parse(fs.readFileSync(path.join(root, "tests/data/chat/cases.json"), "utf8"));
const template = new Template(config.chat_template);
const out = cases.map((c) => {
  const vars = { messages: c.messages, add_generation_prompt: c.add_generation_prompt, bos_token: "", eos_token: config.eos_token };
  if (c.enable_thinking !== undefined) vars.enable_thinking = c.enable_thinking;
  return { ...c, rendered: template.render(vars) };
});
fs.writeFileSync(path.join(root, "tests/data/chat/qwen3_golden.json"), JSON.stringify(out, null, 1) + "\n");
console.log(`rendered ${out.length} cases`);
