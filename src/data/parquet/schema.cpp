// Parquet schema tree and Dremel levels (see schema.hpp).
#include "trlhpc/data/parquet/schema.hpp"

#include "src/data/tokenizer/utf8.hpp"
#include "trlhpc/data/parquet/limits.hpp"

namespace trlhpc::parquet {
namespace {

struct Builder {
  const std::vector<SchemaElement>& elements;
  Schema& schema;
  size_t next = 0;

  // Consumes elements[next] and its subtree.
  std::unique_ptr<SchemaNode> node(const SchemaNode* parent, int depth) {
    if (depth > kMaxParquetSchemaDepth)
      throw FormatError("the schema nests deeper than " + std::to_string(kMaxParquetSchemaDepth) + " (kMaxParquetSchemaDepth)");
    if (next >= elements.size()) throw FormatError("the schema lists fewer elements than its groups claim");
    const SchemaElement& e = elements[next++];
    // Column names become JSON keys (and parts of messages): UTF-8, as Arrow requires of field names.
    if (!tokenizer::detail::is_valid_utf8(e.name)) throw FormatError("a schema name that is not valid UTF-8");
    auto n = std::make_unique<SchemaNode>();
    n->name = e.name;
    n->repetition = parent ? e.repetition : static_cast<int32_t>(Repetition::kRequired);
    if (n->repetition < 0 || n->repetition > 2) throw FormatError("schema element " + e.name + " has an unknown repetition");
    n->max_def = parent ? parent->max_def + (n->repetition != static_cast<int32_t>(Repetition::kRequired)) : 0;
    n->max_rep = parent ? parent->max_rep + (n->repetition == static_cast<int32_t>(Repetition::kRepeated)) : 0;
    n->path = parent && !parent->path.empty() ? parent->path + "." + e.name : (parent ? e.name : "");
    n->is_list = e.logical_list || e.converted_type == kConvertedList;
    n->leaf_begin = static_cast<int>(schema.leaves.size());
    if (e.num_children < 0 || static_cast<size_t>(e.num_children) > elements.size() - next)
      throw FormatError("schema element " + e.name + " claims more children than the schema holds");
    if (e.num_children == 0 && parent) {
      if (e.type < 0 || e.type > static_cast<int32_t>(PhysicalType::kFixedLenByteArray))
        throw FormatError("schema column " + n->path + " has no physical type");
      n->physical_type = e.type;
      n->type_length = e.type_length;
      n->is_string = e.logical_string || e.converted_type == kConvertedUtf8;
      if (static_cast<int64_t>(schema.leaves.size()) >= kMaxParquetColumns)
        throw FormatError("more than " + std::to_string(kMaxParquetColumns) + " columns (kMaxParquetColumns)");
      schema.leaves.push_back(n.get());
    }
    for (int32_t i = 0; i < e.num_children; ++i) n->children.push_back(node(n.get(), depth + 1));
    n->leaf_end = static_cast<int>(schema.leaves.size());
    if (parent && n->leaf_begin == n->leaf_end) throw FormatError("schema group " + n->path + " has no columns");
    return n;
  }
};

}  // namespace

Schema build_schema(const std::vector<SchemaElement>& elements) {
  Schema schema;
  if (elements.empty()) throw FormatError("the file has no schema");
  Builder b{elements, schema};
  schema.root = b.node(nullptr, 0);
  if (b.next != elements.size()) throw FormatError("the schema has elements outside its root");
  if (schema.leaves.empty()) throw FormatError("the file has no columns");
  return schema;
}

}  // namespace trlhpc::parquet
