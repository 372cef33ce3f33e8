#pragma once
// Python str operations on UTF-8 text, as chat templates use them: everything counts Unicode code
// points (len, indexing, slicing), whitespace is Python's str.isspace() set, and case mapping covers
// ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (the scripts role names and prompts use; other
// scripts pass through unchanged, where Python would map a few more letters).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trlhpc::chat_template {

// UTF-8 <-> code points. A byte that is not valid UTF-8 decodes to the lone surrogate U+DC00+byte (Python's
// surrogateescape) and encodes back to the same byte, so malformed text passes through unchanged.
std::u32string utf8_decode(const std::string& s);
std::string utf8_encode(const std::u32string& s);
void utf8_append(std::string& out, char32_t cp);
size_t utf8_length(const std::string& s);  // number of code points

bool python_isspace(char32_t cp);
bool python_isprintable(char32_t cp);
char32_t to_upper(char32_t cp);
char32_t to_lower(char32_t cp);
bool is_cased_letter(char32_t cp);  // has an upper/lower form (for str.title / istitle logic)

// str.strip / lstrip / rstrip: with `chars` absent, Python whitespace; else any code point of `chars`.
std::string python_strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep=None, maxsplit=-1): sep absent -> runs of whitespace, no empty strings.
std::vector<std::string> python_split(const std::string& s, const std::optional<std::string>& sep,
                                      int64_t maxsplit);
// str.replace(old, new, count=-1), including the empty `old` case (inserts between code points).
std::string python_replace(const std::string& s, const std::string& old, const std::string& replacement,
                           int64_t count);
std::string python_upper(const std::string& s);
std::string python_lower(const std::string& s);
std::string python_title(const std::string& s);       // str.title(): "they're" -> "They'Re"
std::string python_capitalize(const std::string& s);  // str.capitalize()
std::string jinja_title(const std::string& s);        // the |title filter: words split at [-\s({[<]

// Python slice bounds for a sequence of `length` items: the indices s[start:stop:step] selects.
std::vector<int64_t> python_slice_indices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                          std::optional<int64_t> step);

}  // namespace trlhpc::chat_template
