// trlhpc: command-line entry point. Dispatches to the sub-commands of CONTRACT.md.
#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "--version") == 0)) {
    std::printf("trlhpc %s\n", TRLHPC_VERSION);
    return 0;
  }
  std::fprintf(stderr, "usage: trlhpc sft|env|export|tokenize [flags]\n");
  return 1;
}
