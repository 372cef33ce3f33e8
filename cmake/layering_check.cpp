// The one source file of every layering-check shared object (cmake/areas.cmake): the checked code
// comes in as a whole static archive; this translation unit only gives the library a source.
namespace trlhpc::layering {
int check_anchor() { return 0; }
}  // namespace trlhpc::layering
