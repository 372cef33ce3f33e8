// GoogleTest main of the unit tests: gtest's own flags, then the GEMM engines (kernel_choice.hpp).
#include <gtest/gtest.h>

#include "kernel_choice.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  trlhpc::testing::choose_kernels_from_args(argc, argv);
  return RUN_ALL_TESTS();
}
