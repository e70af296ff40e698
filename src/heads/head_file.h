// Heads on disk. One layout serves both places a head lives: GGUF metadata
// keys `head.<name>.*` and F32 tensors `head.<name>.{w1,b1,w2,b2,mean,inv_std}`.
//  * A stand-alone head file (`pocket train-head -o X.head`) is a small GGUF
//    file holding one head plus `pocket.head_file.version`; the head names
//    its base model by content hash (formats/content_hash.h).
//  * A Pocket model file may carry any number of heads under the same names
//    (`pocket attach-head`); the model's content hash leaves them out.
#pragma once
#include <string>
#include <vector>

#include "formats/gguf_writer.h"
#include "heads/head.h"

namespace pocket {
class GgufFile;
}

namespace pocket::heads {

inline constexpr int kHeadFileVersion = 1;

// Adds the head's keys and tensors to `w` (the head must outlive w.write()).
void add_head(GgufWriter& w, const Head& h);
// Writes a stand-alone head file (atomically: temporary name, then rename).
void save_head(const Head& h, const std::string& path);
// Every head stored in a parsed GGUF/Pocket file (none: empty).
std::vector<Head> read_heads(const GgufFile& g);
// A stand-alone head file, or a Pocket file with exactly one head or
// `path#name` for one of several. Every size is checked against the file;
// malformed or hostile files give one pocket::Error naming the file.
Head load_head(const std::string& path);
// Throws naming both hashes when the head was trained on another model.
void check_base(const Head& h, const std::string& model_hash, const std::string& head_path);

}  // namespace pocket::heads
