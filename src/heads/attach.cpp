#include "heads/attach.h"

#include <set>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "heads/head_file.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket::heads {

void attach_heads(const std::string& model_path, const std::string& model_hash, const std::vector<Head>& heads,
                  const std::string& out) {
  if (heads.empty()) fail("no heads to attach");
  std::set<std::string> names;
  for (const Head& h : heads) {
    check_base(h, model_hash, "head '" + h.name + "'");
    if (!names.insert(h.name).second) fail("two heads are named '", h.name, "'; rename one (train-head --name)");
  }
  GgufFile g = GgufFile::parse(MappedFile::open(model_path));
  auto replaced = [&](const std::string& key) {
    if (key.rfind("head.", 0) != 0) return false;
    for (const std::string& n : names)
      if (key.compare(5, n.size() + 1, n + ".") == 0) return true;
    return false;
  };
  GgufWriter w(g.alignment());
  for (const auto& [key, value] : g.metadata())
    if (key != "general.alignment" && !replaced(key)) w.set(key, to_meta(value));
  for (const GgufTensorInfo& t : g.tensors())
    if (!replaced(t.name))
      w.add_tensor(t.name, t.type, t.shape, g.tensor_data(t), t.nbytes,
                   is_pq(t.type) ? g.pq_group() : 0);
  for (const Head& h : heads) add_head(w, h);
  w.write(out);
}

}  // namespace pocket::heads
