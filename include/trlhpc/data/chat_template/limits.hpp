#pragma once
// What a chat template may ask for. A template comes from a model directory (tokenizer_config.json or
// chat_template.jinja), which is untrusted input rendered on every rank of a job: a crafted one must
// end in a UserError naming the limit, never in a stack overflow, a hang or an out-of-memory.
//
// Each limit is far above what the templates models ship need (tests/fixtures/chat_templates and the
// real models under /work/shared/data render the same as jinja2 with these limits in force).
#include <cstddef>
#include <cstdint>

namespace trlhpc::chat_template {

// Nesting in the template text: brackets, `not`/unary chains, the depth of one expression's tree
// (`a + b + ...` nests one level per operator) and nested {% if %}/{% for %}/... blocks. Real templates
// nest under 20.
inline constexpr int kMaxTemplateNesting = 256;

// Macro calls in progress at once (a recursive macro). Python's default recursion limit stops jinja2
// at a comparable depth; real templates recurse a few levels (nested JSON schemas of tools).
inline constexpr int kMaxMacroCallDepth = 100;

// Statements and expressions being evaluated at once, all macro frames together: what bounds the
// interpreter's use of the C++ stack (each level is a few native frames).
inline constexpr int kMaxEvaluationDepth = 1024;

// Nesting of one value: a list in a dict in a list ... (messages from a dataset row, or values a
// template builds). Real messages nest under 10 levels (tool-call arguments included).
inline constexpr int kMaxValueDepth = 128;

// Bytes of one string value and of the rendered text: the conversation of one training row.
inline constexpr size_t kMaxStringBytes = size_t{64} << 20;  // 64 MiB

// Items of one list or dict, and code points a string may be split into by iteration.
inline constexpr size_t kMaxListItems = size_t{1} << 20;  // 1,048,576

// range(): jinja2's sandbox limit (jinja2.sandbox.MAX_RANGE).
inline constexpr int64_t kMaxRangeItems = 100000;

// Steps of work in one render: bounds the time a template can take (about a second at the limit). An
// expression or statement counts 1 plus the size of the value it yields (Value::weight: a list counts
// its items, a string 1 per 64 bytes), a loop iteration kLoopIterationSteps (it builds a scope and the
// `loop` object). A real template spends a few hundred steps per message.
inline constexpr int64_t kMaxRenderSteps = 5'000'000;
inline constexpr int64_t kLoopIterationSteps = 128;

// tojson's indent and a printf-style width or precision ('%5d', '%.3f'); real templates use 2 or 4.
inline constexpr int64_t kMaxIndentWidth = 256;
inline constexpr int64_t kMaxFormatWidth = 1000;

}  // namespace trlhpc::chat_template
