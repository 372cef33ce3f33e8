#pragma once
// Rows of one row group rebuilt from its column cursors: Dremel record assembly (Melnik et al., VLDB
// 2010, section 4.3) by recursive descent over the schema tree, each node reading the levels of its
// first leaf column:
//   optional node, def < node.max_def   -> null; every leaf under it holds exactly one entry for it
//   repeated node, def < node.max_def   -> empty list (one entry per leaf)
//   otherwise a list goes on while its first leaf's next entry has rep == the list's max_rep
// Every step takes at least one entry of the node's first leaf, so assembly always ends. A file whose
// columns disagree (one ends early, a row boundary differs) is a FormatError.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "trlhpc/data/parquet/column_cursor.hpp"
#include "trlhpc/data/parquet/schema.hpp"

namespace trlhpc::parquet {

class RowAssembler {
 public:
  RowAssembler(const Schema& schema, std::vector<ColumnCursor>& columns) : schema_(schema), columns_(columns) {}
  // The next row as a JSON object (one member per top-level column).
  nlohmann::ordered_json next_row();
  // True when every column is exhausted (the row group's end); FormatError when only some are.
  bool finished();

 private:
  nlohmann::ordered_json field(const SchemaNode& node);
  nlohmann::ordered_json value(const SchemaNode& node);
  nlohmann::ordered_json instance(const SchemaNode& node);
  template <class Element>
  nlohmann::ordered_json list_of(const SchemaNode& repeated, Element&& element);
  void skip_all(const SchemaNode& node);
  ColumnCursor& first(const SchemaNode& node);
  void count_value();

  const Schema& schema_;
  std::vector<ColumnCursor>& columns_;
  int64_t values_in_row_ = 0;
};

}  // namespace trlhpc::parquet
