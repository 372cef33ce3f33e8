#pragma once
// The schema tree of a Parquet file, rebuilt from its flattened depth-first list, with the Dremel
// levels of every node (Melnik et al., "Dremel", VLDB 2010, section 4): a node's max definition level
// counts the optional and repeated nodes from the root down to it, its max repetition level the
// repeated ones. Leaves are the file's columns, numbered in schema order as the row groups list them.
//
// How a node becomes JSON (the shapes Arrow writes and `datasets` reads back):
//   leaf                          -> a value (BYTE_ARRAY text -> string, ints, floats, bools)
//   group annotated LIST          -> array; its repeated child is the element, or, when that child is a
//                                    group of one field (Arrow's list<element>), that field is the element
//   group                         -> object of its children
//   a repeated node not under LIST (legacy 2-level lists) -> array of its instances
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trlhpc/data/parquet/metadata.hpp"

namespace trlhpc::parquet {

struct SchemaNode {
  std::string name;
  int32_t repetition = 0;        // Repetition
  int32_t physical_type = -1;    // leaves only
  int32_t type_length = 0;
  bool is_string = false;        // BYTE_ARRAY annotated UTF8 / STRING (other byte arrays are read as text too)
  bool is_list = false;          // LIST-annotated group
  int max_def = 0, max_rep = 0;  // of this node
  int leaf_begin = 0, leaf_end = 0;  // leaves under this node: [leaf_begin, leaf_end) in column order
  std::vector<std::unique_ptr<SchemaNode>> children;
  std::string path;              // "messages.list.element.content", for messages

  bool is_leaf() const { return children.empty() && physical_type >= 0; }
};

struct Schema {
  std::unique_ptr<SchemaNode> root;
  std::vector<const SchemaNode*> leaves;  // in column order
};

// FormatError on an inconsistent list (children counts that overrun it, a leaf without a type), a
// depth above kMaxParquetSchemaDepth or more than kMaxParquetColumns leaves.
Schema build_schema(const std::vector<SchemaElement>& elements);

}  // namespace trlhpc::parquet
