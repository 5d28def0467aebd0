// A minimal test harness for the engine's C++ unit tests: TEST(name) defines
// a test, CHECK* record a failure (file, line, what) and go on, REQUIRE*
// stop the test. tests/main.cc runs every test and exits non-zero on any
// failure. scripts/engine_tests.sh builds and runs them.
#ifndef TASO_TESTS_CHECK_H_
#define TASO_TESTS_CHECK_H_

#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace taso_test {

struct TestCase {
  const char* name;
  std::function<void()> body;
};

std::vector<TestCase>& registry();
// Records a failure of the running test.
void fail(const char* file, int line, const std::string& what);

struct Register {
  Register(const char* name, std::function<void()> body) {
    registry().push_back({name, std::move(body)});
  }
};

// Thrown by REQUIRE* to end the running test (it is recorded already).
struct Abort {};

template <class A, class B>
std::string describe(const char* a_text, const char* b_text, const A& a, const B& b) {
  std::ostringstream out;
  out << a_text << " == " << b_text << " (" << a << " vs " << b << ")";
  return out.str();
}

}  // namespace taso_test

#define TASO_TEST_CAT2(a, b) a##b
#define TASO_TEST_CAT(a, b) TASO_TEST_CAT2(a, b)
#define TEST(name)                                                            \
  static void name();                                                         \
  static const ::taso_test::Register TASO_TEST_CAT(register_, name)(#name, name); \
  static void name()

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) ::taso_test::fail(__FILE__, __LINE__, "CHECK(" #cond ")"); \
  } while (0)
#define CHECK_EQ(a, b)                                                         \
  do {                                                                         \
    const auto& check_a_ = (a);                                                \
    const auto& check_b_ = (b);                                                \
    if (!(check_a_ == check_b_))                                               \
      ::taso_test::fail(__FILE__, __LINE__,                                    \
                        ::taso_test::describe(#a, #b, check_a_, check_b_));    \
  } while (0)
#define REQUIRE(cond)                                                 \
  do {                                                                \
    if (!(cond)) {                                                    \
      ::taso_test::fail(__FILE__, __LINE__, "REQUIRE(" #cond ")");   \
      throw ::taso_test::Abort{};                                     \
    }                                                                 \
  } while (0)
// `expr` must throw an exception of type `type` whose what() contains `part`.
#define CHECK_THROWS(expr, type, part)                                          \
  do {                                                                          \
    bool thrown_ = false;                                                       \
    try {                                                                       \
      (void)(expr);                                                             \
    } catch (const type& e) {                                                   \
      thrown_ = true;                                                           \
      if (!std::strstr(e.what(), part))                                         \
        ::taso_test::fail(__FILE__, __LINE__,                                   \
                          std::string(#expr " threw '") + e.what() +            \
                              "', which lacks '" + (part) + "'");               \
    }                                                                           \
    if (!thrown_) ::taso_test::fail(__FILE__, __LINE__, #expr " did not throw " #type); \
  } while (0)

#endif  // TASO_TESTS_CHECK_H_
