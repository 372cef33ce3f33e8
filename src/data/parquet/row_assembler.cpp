// Dremel record assembly into JSON rows (see row_assembler.hpp).
#include "trlhpc/data/parquet/row_assembler.hpp"

#include <string>

#include "trlhpc/data/parquet/limits.hpp"

namespace trlhpc::parquet {
namespace {

constexpr int32_t kOptional = static_cast<int32_t>(Repetition::kOptional);
constexpr int32_t kRepeated = static_cast<int32_t>(Repetition::kRepeated);

}  // namespace

ColumnCursor& RowAssembler::first(const SchemaNode& node) {
  ColumnCursor& c = columns_[static_cast<size_t>(node.leaf_begin)];
  if (c.at_end()) throw FormatError("column " + c.leaf().path + " ends before the other columns of its row group");
  return c;
}

void RowAssembler::count_value() {
  if (++values_in_row_ > kMaxParquetRowValues)
    throw FormatError("a row of more than " + std::to_string(kMaxParquetRowValues) + " values (kMaxParquetRowValues)");
}

// A missing node (null, or an empty list): one entry of each leaf under it, all below the node's level.
void RowAssembler::skip_all(const SchemaNode& node) {
  for (int i = node.leaf_begin; i < node.leaf_end; ++i) {
    ColumnCursor& c = columns_[static_cast<size_t>(i)];
    if (c.at_end() || c.def() >= node.max_def)
      throw FormatError("column " + c.leaf().path + " disagrees with " + columns_[static_cast<size_t>(node.leaf_begin)].leaf().path +
                        " about where values are missing");
    c.take(nullptr);
    count_value();
  }
}

nlohmann::ordered_json RowAssembler::field(const SchemaNode& node) {
  if (node.repetition == kRepeated) return list_of(node, [&] { return instance(node); });
  return value(node);
}

nlohmann::ordered_json RowAssembler::value(const SchemaNode& node) {
  if (node.repetition == kOptional && first(node).def() < node.max_def) {
    skip_all(node);
    return nullptr;
  }
  return instance(node);
}

nlohmann::ordered_json RowAssembler::instance(const SchemaNode& node) {
  if (node.is_leaf()) {
    nlohmann::ordered_json v;
    first(node).take(&v);
    count_value();
    return v;
  }
  if (node.is_list && node.children.size() == 1 && node.children[0]->repetition == kRepeated) {
    const SchemaNode& repeated = *node.children[0];
    // Parquet's LIST compatibility rules (LogicalTypes.md): the repeated group's one field is the
    // element, unless the group is named "array" or "<list>_tuple" (then the group itself is).
    const bool group_is_element = repeated.is_leaf() || repeated.children.size() != 1 || repeated.name == "array" ||
                                  repeated.name == node.name + "_tuple";
    if (group_is_element) return list_of(repeated, [&] { return instance(repeated); });
    const SchemaNode& element = *repeated.children[0];
    return list_of(repeated, [&] { return field(element); });
  }
  nlohmann::ordered_json object = nlohmann::ordered_json::object();
  for (const auto& child : node.children) object[child->name] = field(*child);
  return object;
}

template <class Element>
nlohmann::ordered_json RowAssembler::list_of(const SchemaNode& repeated, Element&& element) {
  ColumnCursor& c = first(repeated);
  if (c.def() < repeated.max_def) {
    skip_all(repeated);
    return nlohmann::ordered_json::array();
  }
  nlohmann::ordered_json items = nlohmann::ordered_json::array();
  do {
    items.push_back(element());
  } while (!c.at_end() && c.rep() == repeated.max_rep);
  return items;
}

nlohmann::ordered_json RowAssembler::next_row() {
  values_in_row_ = 0;
  for (auto& c : columns_)
    if (!c.at_end() && c.rep() != 0) throw FormatError("column " + c.leaf().path + " does not start a row where the others do");
  nlohmann::ordered_json row = instance(*schema_.root);
  return row;
}

bool RowAssembler::finished() {
  size_t ended = 0;
  for (auto& c : columns_) ended += c.at_end();
  if (ended != 0 && ended != columns_.size()) throw FormatError("the columns of a row group hold different numbers of rows");
  return ended == columns_.size();
}

}  // namespace trlhpc::parquet
