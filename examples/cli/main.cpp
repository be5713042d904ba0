// qnum command line (placeholder, replaced below).
#include <CLI/CLI.hpp>
#include <qnum/qnum.hpp>
int main(int argc, char** argv) {
  CLI::App app{"qnum"};
  CLI11_PARSE(app, argc, argv);
  return 0;
}
