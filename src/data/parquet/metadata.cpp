// Parquet footer and page headers from Thrift compact bytes (field ids from parquet.thrift).
#include "trlhpc/data/parquet/metadata.hpp"

namespace trlhpc::parquet {
namespace {

using T = ThriftType;

void expect(T got, T want, const char* what) {
  if (got != want) throw ThriftError(std::string("unexpected Thrift type for ") + what);
}

// Reads a list<struct>, calling each(reader) between begin_struct / end_struct of every element.
template <class Fn>
void read_struct_list(ThriftReader& r, const char* what, Fn&& each) {
  T element;
  int64_t n;
  r.begin_list(element, n);
  if (n > 0) expect(element, T::kStruct, what);
  for (int64_t i = 0; i < n; ++i) {
    r.begin_struct();
    each(r);
    r.end_struct();
  }
  r.end_list();
}

int32_t i32_field(ThriftReader& r, T type, const char* what) {
  expect(type, T::kI32, what);
  return r.read_i32();
}

int64_t i64_field(ThriftReader& r, T type, const char* what) {
  expect(type, T::kI64, what);
  return r.read_i64();
}

// LogicalType is a union: the id of its one field says which (1 STRING, 3 LIST, 2 MAP, 4 ENUM, 12 JSON).
void read_logical_type(ThriftReader& r, SchemaElement& e) {
  r.begin_struct();
  int16_t id;
  T type;
  while (r.next_field(id, type)) {
    if (id == 1 || id == 4 || id == 12) e.logical_string = true;
    if (id == 3) e.logical_list = true;
    if (id == 2) e.logical_map = true;
    r.skip(type);
  }
  r.end_struct();
}

void read_schema_element(ThriftReader& r, SchemaElement& e) {
  int16_t id;
  T type;
  while (r.next_field(id, type)) {
    switch (id) {
      case 1: e.type = i32_field(r, type, "SchemaElement.type"); break;
      case 2: e.type_length = i32_field(r, type, "SchemaElement.type_length"); break;
      case 3: e.repetition = i32_field(r, type, "SchemaElement.repetition_type"); break;
      case 4: expect(type, T::kBinary, "SchemaElement.name"); e.name = r.read_binary(); break;
      case 5: e.num_children = i32_field(r, type, "SchemaElement.num_children"); break;
      case 6: e.converted_type = i32_field(r, type, "SchemaElement.converted_type"); break;
      case 10: expect(type, T::kStruct, "SchemaElement.logicalType"); read_logical_type(r, e); break;
      default: r.skip(type);
    }
  }
}

void read_column_meta(ThriftReader& r, ColumnChunkMeta& c) {
  r.begin_struct();
  int16_t id;
  T type;
  while (r.next_field(id, type)) {
    switch (id) {
      case 1: c.type = i32_field(r, type, "ColumnMetaData.type"); break;
      case 3: {
        expect(type, T::kList, "ColumnMetaData.path_in_schema");
        T element;
        int64_t n;
        r.begin_list(element, n);
        if (n > 0) expect(element, T::kBinary, "ColumnMetaData.path_in_schema");
        for (int64_t i = 0; i < n; ++i) c.path.push_back(r.read_binary());
        r.end_list();
        break;
      }
      case 4: c.codec = i32_field(r, type, "ColumnMetaData.codec"); break;
      case 5: c.num_values = i64_field(r, type, "ColumnMetaData.num_values"); break;
      case 7: c.total_compressed_size = i64_field(r, type, "ColumnMetaData.total_compressed_size"); break;
      case 9: c.data_page_offset = i64_field(r, type, "ColumnMetaData.data_page_offset"); break;
      case 11: c.dictionary_page_offset = i64_field(r, type, "ColumnMetaData.dictionary_page_offset"); break;
      default: r.skip(type);
    }
  }
  r.end_struct();
}

void read_row_group(ThriftReader& r, RowGroupMeta& g) {
  int16_t id;
  T type;
  while (r.next_field(id, type)) {
    if (id == 1) {
      expect(type, T::kList, "RowGroup.columns");
      read_struct_list(r, "ColumnChunk", [&](ThriftReader& rr) {
        ColumnChunkMeta& c = g.columns.emplace_back();
        int16_t cid;
        T ctype;
        while (rr.next_field(cid, ctype)) {
          if (cid == 1 && ctype == T::kBinary) c.file_path = rr.read_binary();
          else if (cid == 3 && ctype == T::kStruct) read_column_meta(rr, c);
          else rr.skip(ctype);
        }
      });
    } else if (id == 3) {
      g.num_rows = i64_field(r, type, "RowGroup.num_rows");
    } else {
      r.skip(type);
    }
  }
}

void read_data_page_header(ThriftReader& r, PageHeader& h, bool v2) {
  r.begin_struct();
  int16_t id;
  T type;
  while (r.next_field(id, type)) {
    if (id == 1) h.num_values = i32_field(r, type, "num_values");
    else if (!v2 && id == 2) h.encoding = i32_field(r, type, "encoding");
    else if (v2 && id == 3) h.num_rows = i32_field(r, type, "num_rows");
    else if (v2 && id == 4) h.encoding = i32_field(r, type, "encoding");
    else if (v2 && id == 5) h.def_levels_byte_length = i32_field(r, type, "definition_levels_byte_length");
    else if (v2 && id == 6) h.rep_levels_byte_length = i32_field(r, type, "repetition_levels_byte_length");
    else if (v2 && id == 7 && (type == T::kTrue || type == T::kFalse)) h.v2_is_compressed = r.read_bool(type);
    else r.skip(type);
  }
  r.end_struct();
}

}  // namespace

FileMetaData parse_file_metadata(const uint8_t* data, size_t size) {
  ThriftReader r(data, size);
  FileMetaData m;
  r.begin_struct();
  int16_t id;
  T type;
  while (r.next_field(id, type)) {
    if (id == 2) {
      expect(type, T::kList, "FileMetaData.schema");
      read_struct_list(r, "SchemaElement", [&](ThriftReader& rr) { read_schema_element(rr, m.schema.emplace_back()); });
    } else if (id == 3) {
      m.num_rows = i64_field(r, type, "FileMetaData.num_rows");
    } else if (id == 4) {
      expect(type, T::kList, "FileMetaData.row_groups");
      read_struct_list(r, "RowGroup", [&](ThriftReader& rr) { read_row_group(rr, m.row_groups.emplace_back()); });
    } else {
      r.skip(type);
    }
  }
  r.end_struct();
  return m;
}

PageHeader parse_page_header(const uint8_t* data, size_t size, size_t* header_bytes) {
  ThriftReader r(data, size);
  PageHeader h;
  r.begin_struct();
  int16_t id;
  T type;
  while (r.next_field(id, type)) {
    switch (id) {
      case 1: h.type = i32_field(r, type, "PageHeader.type"); break;
      case 2: h.uncompressed_size = i32_field(r, type, "PageHeader.uncompressed_page_size"); break;
      case 3: h.compressed_size = i32_field(r, type, "PageHeader.compressed_page_size"); break;
      case 5: expect(type, T::kStruct, "DataPageHeader"); read_data_page_header(r, h, false); h.has_data_header = true; break;
      case 7:
        expect(type, T::kStruct, "DictionaryPageHeader");
        read_data_page_header(r, h, false);  // num_values (1), encoding (2): same ids as DataPageHeader
        h.has_dictionary_header = true;
        break;
      case 8: expect(type, T::kStruct, "DataPageHeaderV2"); read_data_page_header(r, h, true); h.has_v2_header = true; break;
      default: r.skip(type);
    }
  }
  r.end_struct();
  *header_bytes = r.consumed();
  return h;
}

}  // namespace trlhpc::parquet
