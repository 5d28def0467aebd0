// Runs every TEST of the engine's C++ unit tests; prints one line per
// failure and a summary; exits 1 on any failure. An argument runs only the
// tests whose names contain it.
#include <cstdio>
#include <exception>

#include "check.h"

namespace taso_test {

namespace {
int failures_in_test = 0;
const char* running = "";
}  // namespace

std::vector<TestCase>& registry() {
  static std::vector<TestCase> tests;
  return tests;
}

void fail(const char* file, int line, const std::string& what) {
  ++failures_in_test;
  std::fprintf(stderr, "FAIL %s (%s:%d): %s\n", running, file, line, what.c_str());
}

}  // namespace taso_test

int main(int argc, char** argv) {
  using namespace taso_test;
  int run = 0, failed = 0;
  for (const TestCase& t : registry()) {
    if (argc > 1 && !std::strstr(t.name, argv[1])) continue;
    running = t.name;
    failures_in_test = 0;
    try {
      t.body();
    } catch (const Abort&) {
      // recorded by REQUIRE
    } catch (const std::exception& e) {
      fail(__FILE__, __LINE__, std::string("uncaught exception: ") + e.what());
    }
    ++run;
    if (failures_in_test) ++failed;
  }
  std::printf("engine tests: %d run, %d failed\n", run, failed);
  return failed || run == 0 ? 1 : 0;
}
