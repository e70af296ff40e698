// pocket quantize: re-quantize any model Pocket reads into one Pocket file
// (or, with --format gguf, a plain GGUF for other engines).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "convert/quantize_model.h"
#include "util/error.h"

namespace pocket::cli {

namespace {

struct QuantizeArgs {
  std::string in, out, tokenizer;
  std::string weights = "q4", embed, head, format = "pocket";
  int group = 0;  // 0: not given
  std::vector<std::string> keep_f32;
};

int quantize(const QuantizeArgs& a) {
  convert::QuantizeOptions o;
  if (a.format != "pocket" && a.format != "gguf") fail("--format: '", a.format, "' is not a format (pocket or gguf)");
  o.plain_gguf = a.format == "gguf";
  o.source_grid = a.weights == "source";
  if (!o.source_grid) o.weights = convert::parse_weight_type(a.weights, "--weights");
  o.embed_given = !a.embed.empty();
  o.embed = convert::parse_weight_type(o.embed_given ? a.embed : "q4", "--embed", false);
  o.head_given = !a.head.empty();
  if (o.head_given) o.head = convert::parse_weight_type(a.head, "--head", false);
  o.group = convert::parse_group(a.group != 0 ? a.group : o.source_grid ? 32 : 64, "--group");
  o.tokenizer_path = a.tokenizer;
  o.keep_f32 = a.keep_f32;
  convert::quantize_model(a.in, a.out, o, convert::terminal_progress());
  std::printf("wrote %s\n", a.out.c_str());
  return 0;
}

}  // namespace

void add_quantize(CLI::App& app, int& rc) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* sub = app.add_subcommand("quantize", "Re-quantize a model (any supported format) into a Pocket file");
  sub->add_option("input", a->in, "Model file or folder")->required();
  sub->add_option("output", a->out, "Pocket file to write")->required();
  sub->add_option("--weights", a->weights, "Type of the layer matrices: q4, q5, q8, f16, f32 or source (default q4). source keeps "
                  "a GGUF's own grid: Q4_0/Q4_1/Q4_K become q4, Q5_0/Q5_1 q5 with their codes, wider types q8 (group 32)");
  sub->add_option("--group", a->group, "Quantization group size: 32, 64 or 128 (default 64; 32 with --weights source)");
  sub->add_option("--embed", a->embed, "Type of the token embedding (and tied output head): q4, q5, q8 or f16 (default q4)");
  sub->add_option("--head", a->head, "Type of an untied output head: q4, q5, q8 or f16 (default: as --embed)");
  sub->add_option("--keep-f32", a->keep_f32,
                  "Leave tensors whose name contains this text in f32 (repeatable; e.g. ffn_down)");
  sub->add_option("--tokenizer", a->tokenizer, "Tokenizer file (llama2.c tokenizer.bin or tokenizer.json)");
  sub->add_option("--format", a->format,
                  "pocket (default) or gguf: a plain GGUF with tokenizer.ggml.* metadata that llama.cpp and gguf-py "
                  "read; f16 or f32 weights only");
  sub->callback([a, &rc] { rc = quantize(*a); });
}

}  // namespace pocket::cli
