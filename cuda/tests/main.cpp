// qnum-cuda-tests: doctest, but with no CUDA device nothing can run; it says so, lists the
// test cases it skipped and exits 77, which CTest reports as skipped (SKIP_RETURN_CODE).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "qnum/cuda/kernels.hpp"

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  if (qnum::cuda::device_count() == 0) {
    std::printf("qnum-cuda-tests: no CUDA device (cudaGetDeviceCount found none): every check below is skipped\n");
    const char* list_argv[] = {argv[0], "--list-test-cases"};
    doctest::Context list(2, list_argv);
    list.run();
    return 77;
  }
  return ctx.run();
}
